"""Course tooling for lesson 11: split the lesson into branches, build notebooks, grade, report, site."""
