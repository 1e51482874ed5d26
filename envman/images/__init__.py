"""Stack images: build, smoke test, promote, the verdict store in labels, and cleaning up."""
