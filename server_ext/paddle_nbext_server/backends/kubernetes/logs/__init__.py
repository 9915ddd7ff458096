"""A replica's log: the launcher's attempt files in the home, the API's pods/log, and the reading and
following that joins them."""
