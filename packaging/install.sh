#!/bin/sh
# Installs Outpost from this directory where there is no dpkg: the files, user and service of the
# .deb, the binary under $PREFIX (/usr/local) and the unit in /etc/systemd/system.
#   sudo ./install.sh                  install, or upgrade (a running service is restarted; a backup
#                                      of its data is taken first, as the .deb's preinst does:
#                                      /var/backups/outpost, the last 3 kept; OUTPOST_SKIP_BACKUP=1
#                                      upgrades without one)
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
  rm -rf "$root$prefix/share/doc/outpost"
  if $live; then systemctl daemon-reload; fi
  echo "outpost: removed; /etc/outpost and /var/lib/outpost are kept (delete them by hand if no longer wanted)"
  exit 0
fi

# an upgrade: the installed version backs up its data first (the new one migrates the database,
# which an older binary then refuses); a failed backup stops here, nothing replaced yet
old_bin="$root$prefix/bin/outpost"
config="$root/etc/outpost/outpost.toml"
data=$(sed -n 's/^[[:space:]]*data-dir[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$config" 2>/dev/null | tail -n 1)
data="$root${data:-/var/lib/outpost}"
if [ -z "${OUTPOST_SKIP_BACKUP:-}" ] && [ -x "$old_bin" ] && [ -f "$data/outpost.db" ] && "$old_bin" backup --help >/dev/null 2>&1; then
  old_version=$("$old_bin" --version 2>/dev/null | awk '{ print $2 }')
  backups="$root/var/backups/outpost"
  dest="$backups/before-upgrade-from-${old_version:-unknown}-$(date -u +%Y%m%dT%H%M%SZ)"
  if [ -e "$dest" ]; then n=2; while [ -e "$dest-$n" ]; do n=$((n + 1)); done; dest="$dest-$n"; fi
  install -d -m 0700 "$backups"
  set -- backup "$dest" --data-dir "$data"
  if [ -f "$config" ]; then set -- "$@" --config "$config"; fi
  if ! "$old_bin" "$@" >/dev/null; then
    echo "outpost: the backup before the upgrade failed (above); nothing was changed." >&2
    echo "outpost: free space in $backups, or upgrade without a backup: OUTPOST_SKIP_BACKUP=1" >&2
    exit 1
  fi
  echo "outpost: backup before the upgrade in $dest"
  ls -1dt "$backups"/before-upgrade-from-* 2>/dev/null | tail -n +4 | while read -r old; do rm -rf "$old"; done
fi

install -d -m 0755 "$root$prefix/bin" "$root/etc/systemd/system" "$root/etc/sysusers.d"
# written beside and renamed: a running binary is never overwritten in place
install -m 0755 "$here/outpost" "$root$prefix/bin/.outpost.new"
mv -f "$root$prefix/bin/.outpost.new" "$root$prefix/bin/outpost"
sed "s#/usr/bin/outpost#$prefix/bin/outpost#g" "$here/outpost.service" > "$root/etc/systemd/system/outpost.service"
chmod 0644 "$root/etc/systemd/system/outpost.service"
install -m 0644 "$here/sysusers.conf" "$root/etc/sysusers.d/outpost.conf"
install -d -m 0755 "$root$prefix/share/doc/outpost"
install -m 0644 "$here/copyright" "$here/changelog.Debian.gz" "$root$prefix/share/doc/outpost/"

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
