"""The command line: click commands that parse, call one ``monte.api`` function, and render."""
