from coursekit.cli import end, main

end(main())
