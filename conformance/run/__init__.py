"""The machinery of a certification run, below the pytest plugin that drives the checks.

- ``invocation``: the one builder of a certification's pytest command line (``Run``);
- ``supervisor``: the CLI's loop of pytest sessions, until every planned check has a result;
- ``supervision``: what a process running checks leaves for whoever watches it (markers, the
  contract-call beacon, faulthandler traces), the watchdog's kill and the record of a lost check;
- ``journal``: a session's results as they are made, one line per check, and the results
  documents made from them;
- ``files``: the files a run writes, named safely and written whole or not at all;
- ``transport``: plain JSON that every process boundary and every file can carry;
- ``scheduling``: the order checks run in, from measured durations;
- ``cluster``: the shards of one run on a Ray cluster.

The layers inside the package are in ``.importlinter`` (contract ``run``).
"""
