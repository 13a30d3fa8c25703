# Shared shell helpers for scripts/: sourced, not run.

# script_usage prints the running script's header comment: its lines after
# the shebang up to the first that is not a comment. Each script in
# scripts/ sources this file from the checkout's root (after cd there, or
# by its full path), so the script is this file's directory plus its name,
# whichever directory it was started from.
script_usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' \
    "$(dirname "${BASH_SOURCE[0]}")/$(basename "$0")"
}

# asks_help: whether any argument is -h, -help or --help.
asks_help() {
  local a
  for a in "$@"; do
    case $a in -h | -help | --help) return 0 ;; esac
  done
  return 1
}

# usage_or_none answers a script that takes no arguments: its usage on
# -h/--help (exit 0), its usage and exit 2 on anything else, before it
# installs or starts anything.
usage_or_none() {
  if asks_help "$@"; then script_usage; exit 0; fi
  if [ $# -gt 0 ]; then
    echo "$(basename "$0") takes no arguments (got: $*)" >&2
    script_usage >&2
    exit 2
  fi
}

ensure_go() {
  if ! command -v go >/dev/null 2>&1; then
    if [ -x /usr/local/go/bin/go ]; then
      export PATH="/usr/local/go/bin:$PATH"
    else
      echo "Go is not installed: install Go 1.26 (https://go.dev/dl) and retry" >&2
      exit 1
    fi
  fi
}

# ensure_valgrind installs valgrind through apt when it is missing: the
# benchmark's instruction counts (--instructions) run under its callgrind.
ensure_valgrind() {
  if command -v valgrind >/dev/null 2>&1; then return 0; fi
  echo "==> installing valgrind (apt-get) for the benchmark's instruction counts"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind >/dev/null
}

# ensure_pgbouncer installs PgBouncer through apt when it is missing:
# internal/cli's TestServeThroughPgBouncer runs serve through it.
ensure_pgbouncer() {
  if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then return 0; fi
  echo "==> installing pgbouncer (apt-get) for the test of serve through PgBouncer"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pgbouncer >/dev/null
}

# npm_ci_pinned DIR PACKAGE installs Node.js through apt when node or npm
# is missing, then runs npm ci in DIR when PACKAGE's installed version is
# not the one DIR's committed package-lock.json pins: a test's Node.js
# peer, exactly as pinned, and nothing done when it already is.
npm_ci_pinned() {
  local dir=$1 pkg=$2 want have
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "==> installing Node.js (apt-get)"
    sudo_if_needed apt-get update -qq
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  fi
  want=$(node -e 'const l=require(process.argv[1]); console.log(l.packages["node_modules/"+process.argv[2]].version)' "$PWD/$dir/package-lock.json" "$pkg")
  have=$(node -e 'try { console.log(require(process.argv[1]).version) } catch { console.log("") }' "$PWD/$dir/node_modules/$pkg/package.json")
  if [ "$want" != "$have" ]; then
    echo "==> npm ci $pkg $want into $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --silent)
  fi
}

# pg_newest_version prints the newest installed PostgreSQL major version:
# the one whose main cluster ensure_postgres starts.
pg_newest_version() {
  ls /usr/lib/postgresql | sort -n | tail -1
}

pg_ready() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h 127.0.0.1 -p 5432
  else
    (exec 3<>/dev/tcp/127.0.0.1/5432) 2>/dev/null
  fi
}

sudo_if_needed() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ensure_postgres installs PostgreSQL through apt when it is missing and
# starts the local cluster when it is down, with trust auth on loopback for
# the postgres user (what the tests use by default).
ensure_postgres() {
  if pg_ready; then return 0; fi
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    echo "==> installing PostgreSQL (apt-get)"
    sudo_if_needed apt-get update -qq
    sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  local ver
  ver=$(pg_newest_version)
  if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ ! -d "/etc/postgresql/$ver/main" ]; then
    # UTF8 whatever the machine's locale (C gives SQL_ASCII), which
    # retrysafe requires.
    sudo_if_needed pg_createcluster --encoding UTF8 --locale C.UTF-8 "$ver" main >/dev/null
  fi
  local hba="/etc/postgresql/$ver/main/pg_hba.conf"
  if [ -f "$hba" ] && ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    # Tests connect as postgres over loopback without a password.
    sudo_if_needed sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$hba"
  fi
  echo "==> starting PostgreSQL $ver"
  sudo_if_needed pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
  for _ in $(seq 1 60); do
    if pg_ready; then return 0; fi
    sleep 0.5
  done
  echo "PostgreSQL did not come up on 127.0.0.1:5432" >&2
  exit 1
}
