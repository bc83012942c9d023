#!/usr/bin/env bash
# scripts/demo.sh (make demo): three federated Switchboard nodes, a, b and c,
# on loopback with mutual TLS and a development CA, each with one pull
# frontend (fe-a, fe-b, fe-c) and the same three routes on every node:
#
#   prefix 1 -> fe-a (served by a)   2 -> fe-b (by b)   3 -> fe-c (by c)
#
# so a message submitted anywhere reaches the node that serves its frontend.
# It waits until every node sees the other two healthy and knows their
# frontends, prints how to send a message from a to b's frontend, and runs
# until Ctrl-C, which stops all three nodes.
#
# Environment:
#   DEMO_DIR   where certificates, data and logs go (default ./tmp/demo; it is
#              recreated on every run)
#   DEMO_PORT  first HTTPS port (default 18441): a, b, c listen on DEMO_PORT,
#              +1, +2 and serve /metrics on DEMO_PORT+100, +101, +102
#   BIN        the binary (default bin/switchboard; `make demo` builds it)
# Relative paths are taken from the repository root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BIN=${BIN:-bin/switchboard}
DEMO_DIR=${DEMO_DIR:-./tmp/demo}
DEMO_PORT=${DEMO_PORT:-18441}
NODES=(a b c)
START_TIMEOUT=30 # seconds for a node to answer /readyz
MESH_TIMEOUT=30  # seconds for every node to see the others healthy

die() {
	echo "demo: $*" >&2
	exit 1
}

[[ -x $BIN ]] || die "$BIN not found or not executable; run 'make build' (or 'make demo')"
command -v curl >/dev/null || die "curl is required"
[[ $DEMO_PORT =~ ^[0-9]+$ ]] && ((DEMO_PORT > 0 && DEMO_PORT + 102 < 65536)) ||
	die "DEMO_PORT=$DEMO_PORT is not a usable port number"

declare -A API METRICS PID
for i in "${!NODES[@]}"; do
	n=${NODES[$i]}
	API[$n]=127.0.0.1:$((DEMO_PORT + i))
	METRICS[$n]=127.0.0.1:$((DEMO_PORT + 100 + i))
done

# A port something already listens on would make a node fail at start (or,
# worse, the demo talk to someone else's server).
for n in "${NODES[@]}"; do
	for addr in "${API[$n]}" "${METRICS[$n]}"; do
		if (exec 3<>"/dev/tcp/${addr%:*}/${addr#*:}") 2>/dev/null; then
			die "port ${addr#*:} is already in use (another demo still running?); stop it or set DEMO_PORT"
		fi
	done
done

# A fresh directory per run: certificates are issued once per CA, and a
# clean store makes the walkthrough below come out as printed. Refuse to
# remove a directory this script did not create.
if [[ -e $DEMO_DIR ]]; then
	[[ -f $DEMO_DIR/.switchboard-demo ]] ||
		die "$DEMO_DIR exists and was not made by this script; remove it or set DEMO_DIR"
	rm -rf "$DEMO_DIR"
fi
mkdir -p "$DEMO_DIR"
touch "$DEMO_DIR/.switchboard-demo"
DEMO_DIR=$(cd "$DEMO_DIR" && pwd)
CERTS=$DEMO_DIR/certs

STOPPING=0
# cleanup stops the nodes: on Ctrl-C, on any exit of this script, and when
# its terminal goes away. It signals them before it prints anything (the
# terminal may be gone) and carries on past any failure.
cleanup() {
	local rc=$?
	((STOPPING)) && return
	STOPPING=1
	set +e +m # no job notices ("Terminated ...") while the nodes stop
	trap '' INT TERM HUP PIPE
	trap - EXIT
	local pids=() n p
	for n in "${NODES[@]}"; do
		[[ -n ${PID[$n]:-} ]] && kill -0 "${PID[$n]}" 2>/dev/null && pids+=("${PID[$n]}")
	done
	if ((${#pids[@]})); then
		# A node frozen with kill -STOP (the partition walkthrough) must run
		# again to see the SIGTERM.
		kill -CONT "${pids[@]}" 2>/dev/null
		kill -TERM "${pids[@]}" 2>/dev/null
		{
			echo
			echo "demo: stopping nodes (pids ${pids[*]})..."
		} 2>/dev/null
		# A node stops within seconds (graceful: it finishes commits under
		# way); after 15 s it is killed.
		for _ in $(seq 150); do
			local alive=0
			for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
			((alive)) || break
			sleep 0.1
		done
		for p in "${pids[@]}"; do
			if kill -0 "$p" 2>/dev/null; then
				kill -KILL "$p" 2>/dev/null
				echo "demo: node pid $p did not stop in 15 s; killed it" >&2 2>/dev/null
			fi
		done
		wait "${pids[@]}" 2>/dev/null
		echo "demo: stopped. Logs and data stay in $DEMO_DIR" 2>/dev/null
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 0' INT # Ctrl-C is how the demo ends: not an error
trap 'exit 143' TERM
trap 'exit 129' HUP # the terminal closed

# fail prints why the demo cannot go on, with the tail of a node's log.
fail() {
	local node=$1
	shift
	echo "demo: $*" >&2
	if [[ -n $node ]]; then
		echo "demo: last lines of $DEMO_DIR/$node.log:" >&2
		tail -n 20 "$DEMO_DIR/$node.log" | sed 's/^/    /' >&2 || true
	fi
	echo "demo: all logs are in $DEMO_DIR/{a,b,c}.log" >&2
	exit 1
}

# api NODE METHOD PATH [BODY]: one call to a node's API; prints the body,
# and fails (the body on stderr) on an answer that is not 2xx.
api() {
	local n=$1 method=$2 path=$3 body=${4:-} out code
	local args=(-sS --max-time 10 --cacert "$CERTS/ca.pem" -X "$method" -w '\n%{http_code}')
	[[ -n $body ]] && args+=(-H 'Content-Type: application/json' -d "$body")
	out=$(curl "${args[@]}" "https://${API[$n]}$path") || return 1
	code=${out##*$'\n'}
	out=${out%$'\n'*}
	if [[ $code != 2?? ]]; then
		echo "$method $path on $n: HTTP $code $out" >&2
		return 1
	fi
	printf '%s\n' "$out"
}

echo "demo: certificates for a, b, c in $CERTS"
"$BIN" certs init --dir "$CERTS" --nodes a,b,c >/dev/null ||
	die "'$BIN certs init --dir $CERTS --nodes a,b,c' failed"

# Job control puts each node in a process group of its own, so that Ctrl-C
# reaches only this script (and make): the trap below then stops every node
# with one SIGTERM, a graceful stop. (A node that got the terminal's SIGINT
# too would take the trap's SIGTERM as a second signal and exit at once.)
set -m
for n in "${NODES[@]}"; do
	peers=()
	for p in "${NODES[@]}"; do [[ $p != "$n" ]] && peers+=("${API[$p]}"); done
	"$BIN" run --name "$n" --instance-id "$n" \
		--listen "${API[$n]}" --metrics-listen "${METRICS[$n]}" \
		--data-dir "$DEMO_DIR/data-$n" \
		--tls-ca "$CERTS/ca.pem" --tls-cert "$CERTS/$n.pem" --tls-key "$CERTS/$n.key" \
		--federation --peers "$(
			IFS=,
			echo "${peers[*]}"
		)" \
		--health-interval 2s --registry-interval 2s \
		--log-format text \
		</dev/null >"$DEMO_DIR/$n.log" 2>&1 &
	PID[$n]=$!
	echo "demo: node $n  pid ${PID[$n]}  https://${API[$n]}  metrics http://${METRICS[$n]}/metrics  log $DEMO_DIR/$n.log"
done

# Every node answers /readyz within START_TIMEOUT.
for n in "${NODES[@]}"; do
	deadline=$((SECONDS + START_TIMEOUT))
	until curl -sf --max-time 2 --cacert "$CERTS/ca.pem" "https://${API[$n]}/readyz" >/dev/null 2>&1; do
		kill -0 "${PID[$n]}" 2>/dev/null || fail "$n" "node $n exited during start-up"
		((SECONDS < deadline)) || fail "$n" "node $n did not become ready within ${START_TIMEOUT} s"
		sleep 0.2
	done
done
echo "demo: all three nodes are ready"

for n in "${NODES[@]}"; do
	api "$n" PUT "/api/frontends/fe-$n" '{"mode":"pull"}' >/dev/null ||
		fail "$n" "registering pull frontend fe-$n on node $n failed"
done
echo "demo: pull frontends fe-a on a, fe-b on b, fe-c on c"

# peer_ok NODE PEER: NODE's /api/peers shows PEER healthy and serving
# fe-PEER. The answer is one line of JSON; each peer's object starts with
# its "node" field, so splitting there isolates one peer (no jq needed).
peer_ok() {
	local doc
	doc=$(api "$1" GET /api/peers 2>/dev/null) || return 1
	doc=$(sed 's/{"node":/\n&/g' <<<"$doc" | grep -F "{\"node\":\"$2\"") || return 1
	grep -qF '"state":"healthy"' <<<"$doc" && grep -qF "\"fe-$2\"" <<<"$doc"
}

echo "demo: waiting until every node sees the other two healthy (health and registry every 2 s)..."
deadline=$((SECONDS + MESH_TIMEOUT))
for n in "${NODES[@]}"; do
	for p in "${NODES[@]}"; do
		[[ $p == "$n" ]] && continue
		until peer_ok "$n" "$p"; do
			for x in "${NODES[@]}"; do
				kill -0 "${PID[$x]}" 2>/dev/null || fail "$x" "node $x exited"
			done
			if ((SECONDS >= deadline)); then
				echo "demo: node $n's view of its peers (GET /api/peers):" >&2
				api "$n" GET /api/peers >&2 || true
				fail "$n" "node $n does not see $p healthy with frontend fe-$p after ${MESH_TIMEOUT} s"
			fi
			sleep 0.5
		done
	done
done
echo "demo: every node sees the other two healthy"

# Routes name frontends; each node learns from its peers' registries who
# serves which, so the same three routes go on every node.
for n in "${NODES[@]}"; do
	for i in 1 2 3; do
		fe=fe-${NODES[$((i - 1))]}
		api "$n" PUT "/api/routes/$i" "{\"frontend\":\"$fe\"}" >/dev/null ||
			fail "$n" "PUT /api/routes/$i -> $fe on node $n failed"
	done
done
echo "demo: routes on every node: 1 -> fe-a, 2 -> fe-b, 3 -> fe-c"

REL=$CERTS
if [[ $CERTS == "$PWD"/* ]]; then REL=${CERTS#"$PWD"/}; fi

cat <<EOF

==============================================================================
 Switchboard federation demo: three nodes, mutual TLS, one CA
------------------------------------------------------------------------------
 node  API (HTTPS)                   metrics                              log
EOF
for n in "${NODES[@]}"; do
	printf ' %-4s  %-28s  %-35s  %s\n' "$n" "https://${API[$n]}" "http://${METRICS[$n]}/metrics" "$DEMO_DIR/$n.log"
done
cat <<EOF

 frontends: fe-a on a, fe-b on b, fe-c on c (pull)
 routes on every node: 1... -> fe-a   2... -> fe-b   3... -> fe-c

 In another terminal (from $PWD):

   CURL="curl -sS --cacert $REL/ca.pem"
   A=https://${API[a]} B=https://${API[b]} C=https://${API[c]}

 1. Submit on a a message for b's frontend (destination starts with 2):

   \$CURL -X POST \$A/api/messages -d '{"id":"demo-1","source_msisdn":"15550100","destination_msisdn":"2025550123","message_body":"hello from a"}'
   # -> {"id":"demo-1","state":"pending"}; a forwards it to b at once

 2. On b, fe-b polls (waits up to 5 s) and acknowledges it:

   \$CURL -X POST \$B/api/frontends/fe-b/poll -d '{"max":10,"wait_ms":5000,"lease_ms":30000}'
   \$CURL -X POST \$B/api/frontends/fe-b/ack -d '{"results":[{"id":"demo-1","status":"delivered"}]}'

 3. On a, the message is delivered (b's delivery_status came back):

   \$CURL \$A/api/messages/demo-1      # state "delivered", history pending -> forwarded -> delivered
   \$CURL \$B/api/messages/demo-1      # b's copy: pending -> delivered

 4. Peers, and the federation metrics:

   \$CURL \$A/api/peers
   \$CURL \$A/api/status
   curl -s http://${METRICS[a]}/metrics | grep -E '^switchboard_(peer_state|forward_queue_depth|federation_)'

 5. A partition: stop b (kill -STOP ${PID[b]}), submit more for 2..., watch them
    wait forward_queued on a (\$CURL "\$A/api/messages?state=forward_queued");
    kill -CONT ${PID[b]} and they drain. (See docs/federation.md.)

 The web UI of each node is at its API address (e.g. \$A/ in a browser that
 trusts $REL/ca.pem).

 Ctrl-C stops all three nodes.
==============================================================================
EOF

# Run until Ctrl-C, or until a node exits on its own (then stop the rest).
while :; do
	wait -n "${PID[@]}" 2>/dev/null || true
	for n in "${NODES[@]}"; do
		if ! kill -0 "${PID[$n]}" 2>/dev/null; then
			fail "$n" "node $n (pid ${PID[$n]}) exited"
		fi
	done
done
