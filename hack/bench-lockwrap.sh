#!/usr/bin/env bash
# lockwrap's start-up overhead and Redis round trips per run (issue 8, "Start-up cost").
#
# Builds lockwrap and an empty Go program (both static, CGO_ENABLED=0, -trimpath), starts
# a throwaway redis-server on a free loopback port and runs, interleaved, N times each:
#   /bin/true
#   emptybin                                  (an empty static Go binary: Go's own floor)
#   lockwrap -h                               (lockwrap's start-up and init, no Redis, no child)
#   lockwrap --redis-url … -- /bin/true       (a whole uncontended run, a fresh key each)
# It prints the median wall times, lockwrap's added median over emptybin — with and without
# the Redis server's own time — and the Redis commands per run from INFO commandstats.
#
#   hack/bench-lockwrap.sh            N=200 by default
#   N=500 hack/bench-lockwrap.sh
# Needs go, redis-server and redis-cli. Exits 0 whatever the figures; BENCH_STRICT=1 makes
# a missed target exit 1.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${N:-200}
target_added_us=3000 # lockwrap's added median over emptybin, Redis time excluded
target_round_trips=3 # acquire, release, at most one renew per interval; /bin/true renews none

for tool in go redis-server redis-cli; do
	command -v "$tool" >/dev/null || {
		echo "bench-lockwrap: $tool not found (hack/install-deps.sh installs Redis)" >&2
		exit 1
	}
done

work=$(mktemp -d)
redis_pid=
cleanup() {
	if [ -n "$redis_pid" ]; then
		kill "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "== machine"
echo "cpus: $(nproc); model: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (others' load skews every figure)"
echo "go: $(go env GOVERSION); redis: $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')"

echo "== building (CGO_ENABLED=0, -trimpath)"
CGO_ENABLED=0 go build -trimpath -o "$work/lockwrap" ./cmd/lockwrap
mkdir "$work/empty"
printf 'package main\n\nfunc main() {}\n' >"$work/empty/main.go"
printf 'module emptybin\n\ngo 1.22\n' >"$work/empty/go.mod"
(cd "$work/empty" && CGO_ENABLED=0 GOWORK=off GOFLAGS="" go build -trimpath -o "$work/emptybin" .)
echo "lockwrap: $(stat -c %s "$work/lockwrap") bytes; emptybin: $(stat -c %s "$work/emptybin") bytes"

# A free loopback port: try random ones until a redis-server stays up and answers.
port=
for _ in $(seq 1 20); do
	p=$((20000 + RANDOM % 40000))
	redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
		--dir "$work" --logfile "$work/redis.log" &
	redis_pid=$!
	for _ in $(seq 1 100); do
		if [ "$(redis-cli -p "$p" ping 2>/dev/null)" = PONG ]; then
			port=$p
			break
		fi
		kill -0 "$redis_pid" 2>/dev/null || break
		sleep 0.05
	done
	[ -n "$port" ] && break
	kill "$redis_pid" 2>/dev/null || true
	wait "$redis_pid" 2>/dev/null || true
	redis_pid=
done
[ -n "$port" ] || {
	echo "bench-lockwrap: could not start redis-server" >&2
	exit 1
}
echo "redis-server on 127.0.0.1:$port"

url="redis://127.0.0.1:$port"
occurrence=$(date -u +%Y-%m-%dT%H:%M:00Z)
lockwrap_run() {
	"$work/lockwrap" --redis-url "$url" --key "bench-$1" --holder bench --occurrence "$occurrence" \
		--termination-log "" -- /bin/true
}
# Warm up (page cache, Redis script cache), then start counting.
for i in 1 2 3; do
	lockwrap_run "warmup-$i" >/dev/null 2>&1
	"$work/emptybin"
	/bin/true
done
redis-cli -p "$port" config resetstat >/dev/null

declare -a t_true t_empty t_help t_run c_true c_empty c_help c_run
# children_cpu sets cpu to the CPU time (user+sys, µs) of this shell's reaped children, from
# the times builtin; no subshells (they would count themselves).
children_cpu() {
	local u s
	times >"$work/times"
	{
		read -r _
		read -r u s
	} <"$work/times"
	dur_us "$u"
	cpu=$d_us
	dur_us "$s"
	cpu=$((cpu + d_us))
}
dur_us() { # sets d_us from 1m2.345s
	local d=$1 m sec frac
	m=${d%%m*}
	d=${d#*m}
	d=${d%s}
	sec=${d%.*}
	frac=${d#*.}
	d_us=$(((m * 60 + 10#$sec) * 1000000 + 10#$frac * 1000))
}
elapsed_us() { # runs "$@": us is its wall time, cus its CPU time (user+sys, with its children), in µs
	local start end c0
	children_cpu
	c0=$cpu
	start=${EPOCHREALTIME/./}
	"$@" >/dev/null 2>&1 || true
	end=${EPOCHREALTIME/./}
	us=$((end - start))
	children_cpu
	cus=$((cpu - c0))
}
echo "== timing: $n runs each, interleaved"
for i in $(seq 1 "$n"); do
	elapsed_us /bin/true
	t_true+=("$us") c_true+=("$cus")
	elapsed_us "$work/emptybin"
	t_empty+=("$us") c_empty+=("$cus")
	elapsed_us "$work/lockwrap" -h --termination-log ""
	t_help+=("$us") c_help+=("$cus")
	elapsed_us lockwrap_run "$i"
	t_run+=("$us") c_run+=("$cus")
done
stats=$(redis-cli -p "$port" info commandstats)
conns=$(redis-cli -p "$port" info stats | sed -n 's/^total_connections_received:\([0-9]*\).*/\1/p')
conns=$((conns - 2)) # the two INFOs' redis-cli connections (resetstat zeroed the rest)

# commandstats also counts the commands a script calls; MONITOR tells the client's own
# commands ("[db 127.0.0.1:port]", each one round trip) from a script's ("[db lua]").
# A separate pass, so that MONITOR does not slow the timed runs.
m=$((n < 50 ? n : 50))
redis-cli -p "$port" monitor >"$work/monitor.log" &
monitor_pid=$!
until grep -q OK "$work/monitor.log" 2>/dev/null; do sleep 0.01; done
for i in $(seq 1 "$m"); do
	lockwrap_run "monitor-$i" >/dev/null 2>&1
done
until [ "$(grep -c '"evalsha"\|"eval"' "$work/monitor.log")" -ge $((2 * m)) ]; do sleep 0.01; done
kill "$monitor_pid"
wait "$monitor_pid" 2>/dev/null || true
client_cmds=$(grep -v '\[[0-9]* lua\]' "$work/monitor.log" | sed -n 's/^[0-9.]* \[[^]]*\] "\([^"]*\)".*/\1/p' |
	tr '[:upper:]' '[:lower:]' | sort | uniq -c)
client_calls() { awk -v c="$1" '$2 == c { print $1; found = 1 } END { if (!found) print 0 }' <<<"$client_cmds"; }

echo "== Redis commands per lockwrap run"
echo "   total: INFO commandstats over the $n timed runs (scripts' inner calls included; the bench's INFO/CONFIG left out)"
echo "   sent:  sent by lockwrap itself, one round trip each (MONITOR over $m more runs)"
printf '  %-12s %10s %10s %14s\n' command total/run sent/run "µs in Redis"
redis_us=0
while IFS=: read -r name rest; do
	cmd=${name#cmdstat_}
	case $cmd in info | config*) continue ;; esac
	calls=$(sed -n 's/^calls=\([0-9]*\),.*/\1/p' <<<"$rest")
	usec=$(sed -n 's/^calls=[0-9]*,usec=\([0-9]*\),.*/\1/p' <<<"$rest")
	printf '  %-12s %10s %10s %14s\n' "$cmd" "$(awk -v c="$calls" -v n="$n" 'BEGIN { printf "%.2f", c / n }')" \
		"$(awk -v c="$(client_calls "$cmd")" -v n="$m" 'BEGIN { printf "%.2f", c / n }')" "$usec"
	redis_us=$((redis_us + usec))
done < <(grep '^cmdstat_' <<<"$stats" | tr -d '\r')
# Commands lockwrap sent that commandstats left out above (INFO).
while read -r count cmd; do
	case $cmd in info) printf '  %-12s %10s %10s %14s\n' "$cmd" "-" "$(awk -v c="$count" -v n="$m" 'BEGIN { printf "%.2f", c / n }')" "-" ;; esac
done <<<"$client_cmds"
sent=$(awk '{ s += $1 } END { print s + 0 }' <<<"$client_cmds")
rt_per_run=$(awk -v c="$sent" -v n="$m" 'BEGIN { printf "%.2f", c / n }')
hello=$(client_calls hello)
ping=$(client_calls ping)
echo "  connections:  $(awk -v c="$conns" -v n="$n" 'BEGIN { printf "%.2f", c / n }')/run"
echo "  round trips:  $rt_per_run/run (target $target_round_trips: acquire, release, at most one renew per interval; no HELLO, no PING)"

median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }
ms() { printf '%d.%03d ms' $(($1 / 1000)) $(($1 % 1000)); }
m_true=$(median "${t_true[@]}")
m_empty=$(median "${t_empty[@]}")
m_help=$(median "${t_help[@]}")
m_run=$(median "${t_run[@]}")
cm_true=$(median "${c_true[@]}")
cm_empty=$(median "${c_empty[@]}")
cm_help=$(median "${c_help[@]}")
cm_run=$(median "${c_run[@]}")
redis_per_run=$((redis_us / n))
added=$((m_run - m_empty))
added_no_redis=$((added - redis_per_run))
echo "== median of $n: wall time, CPU time (user+sys, the command's children included; ms resolution, less skewed by load)"
row() { printf '  %-44s %12s %12s\n' "$1" "$2" "$3"; }
row "" wall cpu
row "/bin/true" "$(ms "$m_true")" "$(ms "$cm_true")"
row "emptybin (empty static Go binary)" "$(ms "$m_empty")" "$(ms "$cm_empty")"
row "lockwrap -h (start-up + init only)" "$(ms "$m_help")" "$(ms "$cm_help")"
row "lockwrap … -- /bin/true (whole run)" "$(ms "$m_run")" "$(ms "$cm_run")"
echo "== lockwrap's cost (differences of the medians)"
row "emptybin over /bin/true" "$(ms $((m_empty - m_true)))" "$(ms $((cm_empty - cm_true)))"
row "lockwrap -h over emptybin (init)" "$(ms $((m_help - m_empty)))" "$(ms $((cm_help - cm_empty)))"
row "lockwrap run over emptybin (added median)" "$(ms "$added")" "$(ms $((cm_run - cm_empty)))"
row "  of which Redis server time (commandstats)" "$(ms "$redis_per_run")" ""
row "  added, Redis server time excluded" "$(ms "$added_no_redis")" "(target ≤ $(ms "$target_added_us"), wall)"
row "lockwrap run / emptybin (ratio)" "$(awk -v a="$m_run" -v b="$m_empty" 'BEGIN { printf "%.2f", a / b }')" \
	"$(awk -v a="$cm_run" -v b="$cm_empty" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
echo "  (loopback network and Go's connect path are not excluded: only the server's time is known exactly)"

ok=yes
[ "$added_no_redis" -le "$target_added_us" ] || ok=no
awk -v r="$rt_per_run" -v t="$target_round_trips" 'BEGIN { exit !(r <= t) }' || ok=no
[ "$hello" -eq 0 ] && [ "$ping" -eq 0 ] || ok=no
echo "== meets the targets: $ok"
if [ "$ok" = no ] && [ "${BENCH_STRICT:-0}" = 1 ]; then
	exit 1
fi
