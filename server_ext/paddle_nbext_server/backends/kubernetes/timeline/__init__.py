"""A job's timeline: entries derived from its objects and its folder in the home, written by the server."""
