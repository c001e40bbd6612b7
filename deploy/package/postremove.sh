#!/bin/sh
# deb purge: dpkg removes the conffiles (kept on remove); galago's logs
# and run directory go too. Other files under /etc/gala-gopher (a
# gala-gopher-custom.json of your own) are left.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = purge ]; then
	rm -rf /var/log/gala-gopher /run/gala_gopher
fi
