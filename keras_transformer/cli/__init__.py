"""absl-flags entry points. Each main is thin: flags -> recipe -> one library call."""
