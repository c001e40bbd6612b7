#!/bin/sh
# Stops galago before its files go (deb: remove/upgrade; rpm: $1 = 0 on erase).
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl disable --now galago.service >/dev/null 2>&1 || true
	fi
	;;
esac
