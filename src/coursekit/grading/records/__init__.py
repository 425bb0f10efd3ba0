"""What the grading leaves behind: the gradebook recorder, the reports, feedback, exports and the copy check."""
