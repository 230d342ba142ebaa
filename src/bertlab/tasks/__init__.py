"""Task families (sequence, token, qa, mlm, clm, rtd, multiple_choice, embedding): for each, the head it builds, the loss on a
batch, the metrics over a split, and the predictions it returns. ``families.build_family`` picks one."""
