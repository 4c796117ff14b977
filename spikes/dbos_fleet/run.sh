#!/bin/sh
# The DBOS fleet spike: a throwaway Postgres 15 (unix socket only, trust auth), node A
# runs a turn, node B follows it, A is SIGKILLed in its tool call, B recovers A's turn.
# Needs a Python with `dbos` and `psycopg[binary]` as $PY (not a jpd dependency).
set -eu
PY=${PY:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/jpd-spike.XXXXXX)
chmod 755 "$WORK"
AS=""
[ "$(id -u)" = 0 ] && AS="runuser -u postgres --"  # initdb refuses to run as root
mkdir -p "$WORK/pg" "$WORK/sock" && chown postgres "$WORK/pg" "$WORK/sock" 2>/dev/null || true
$AS initdb -D "$WORK/pg" -U postgres --auth=trust >/dev/null
$AS pg_ctl -s -D "$WORK/pg" -l "$WORK/pg/server.log" -o "-k $WORK/sock -c listen_addresses=''" -w start
trap '$AS pg_ctl -s -D "$WORK/pg" -m immediate stop; rm -rf "$WORK"' EXIT
createdb -h "$WORK/sock" -U postgres spike
URL="postgresql+psycopg://postgres@/spike?host=$WORK/sock"

"$PY" "$HERE/node.py" "$URL" run A t-1 >"$WORK/a.out" 2>&1 &
A=$!
"$PY" "$HERE/node.py" "$URL" follow-then-recover B t-1 A "$WORK/a-is-dead" >"$WORK/b.out" 2>"$WORK/b.err" &
B=$!
# Kill A once its tool has started (the marker row exists).
until psql -h "$WORK/sock" -U postgres -d spike -tAc "select 1 from jpd_tool_marks" 2>/dev/null | grep -q 1; do
  sleep 0.2
done
kill -9 "$A"
echo "killed node A in its tool call"
touch "$WORK/a-is-dead"
wait "$B"
cat "$WORK/b.out"
