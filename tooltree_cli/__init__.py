"""The `tooltree` command line: parses, calls the packages, prints."""
