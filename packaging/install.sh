#!/bin/sh
# Installs Outpost from this directory where there is no dpkg: the files, user and service of the
# .deb, the binary under $PREFIX (/usr/local) and the unit in /etc/systemd/system.
#   sudo ./install.sh                  install, or upgrade (a running service is restarted)
#   sudo ./install.sh --uninstall      remove binary, unit and user config; keep data and settings
# DESTDIR=/some/root installs into another root: the service there is neither reloaded nor
# started, and nothing of the running system is touched.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=${DESTDIR:-}
prefix=${PREFIX:-/usr/local}
live=false
if [ -z "$root" ] && [ -d /run/systemd/system ]; then live=true; fi

if [ "${1:-}" = "--uninstall" ]; then
  if $live; then systemctl disable --now outpost.service 2>/dev/null || true; fi
  rm -f "$root$prefix/bin/outpost" "$root/etc/systemd/system/outpost.service" "$root/etc/sysusers.d/outpost.conf"
  if $live; then systemctl daemon-reload; fi
  echo "outpost: removed; /etc/outpost and /var/lib/outpost are kept (delete them by hand if no longer wanted)"
  exit 0
fi

install -d -m 0755 "$root$prefix/bin" "$root/etc/systemd/system" "$root/etc/sysusers.d"
# written beside and renamed: a running binary is never overwritten in place
install -m 0755 "$here/outpost" "$root$prefix/bin/.outpost.new"
mv -f "$root$prefix/bin/.outpost.new" "$root$prefix/bin/outpost"
sed "s#/usr/bin/outpost#$prefix/bin/outpost#g" "$here/outpost.service" > "$root/etc/systemd/system/outpost.service"
chmod 0644 "$root/etc/systemd/system/outpost.service"
install -m 0644 "$here/sysusers.conf" "$root/etc/sysusers.d/outpost.conf"

if command -v systemd-sysusers >/dev/null 2>&1; then
  systemd-sysusers ${root:+--root="$root"} outpost.conf
elif ! grep -q '^outpost:' "$root/etc/passwd" 2>/dev/null; then
  useradd ${root:+--prefix "$root"} --system --user-group --home-dir /var/lib/outpost \
    --no-create-home --shell /usr/sbin/nologin --comment "Outpost IoT runtime" outpost
fi
gid=$(awk -F: '$1 == "outpost" { print $3 }' "$root/etc/group")

install -d -m 0750 -o 0 -g "$gid" "$root/etc/outpost"
if [ -e "$root/etc/outpost/outpost.toml" ]; then
  # the admin's settings stay; the new defaults go beside them
  install -m 0640 -o 0 -g "$gid" "$here/outpost.toml" "$root/etc/outpost/outpost.toml.new"
  echo "outpost: kept /etc/outpost/outpost.toml (this version's defaults: outpost.toml.new)"
else
  install -m 0640 -o 0 -g "$gid" "$here/outpost.toml" "$root/etc/outpost/outpost.toml"
fi

if $live; then
  systemctl daemon-reload
  if systemctl is-active --quiet outpost.service; then
    systemctl restart outpost.service
    echo "outpost: upgraded and restarted"
  else
    echo "outpost: installed; edit /etc/outpost/outpost.toml, then: systemctl enable --now outpost"
  fi
fi
