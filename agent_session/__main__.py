"""``python -m agent_session``: the ``agent-session`` command line."""

import sys

from agent_session.cli.entry import main

sys.exit(main())
