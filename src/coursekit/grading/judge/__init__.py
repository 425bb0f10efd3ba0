"""What decides scores and flags: the trusted runs of test cells and the flags, from data the trusted side holds."""
