#!/bin/sh
# Registers the unit with a running systemd; nothing is started: the
# administrator enables galago (systemctl enable --now galago), as with
# gala-gopher's package.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
