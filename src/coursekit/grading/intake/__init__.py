"""What comes in before grading: the release and the submissions (folders and LMS zips)."""
