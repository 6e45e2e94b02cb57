#!/usr/bin/env bash
# The local cluster's host Redis (127.0.0.1 and 10.244.0.1, port $LOCKEDCRON_REDIS_PORT, default 6379):
#   hack/cluster/redis.sh start|stop|restart|status
# `restart` is what an e2e test of a Redis outage uses; the data survives it (append-only file),
# as it would on a real Redis with persistence. `stop` then `start` likewise.
source "$(dirname "$0")/lib.sh"
case ${1:-status} in
  start) pid_of redis >/dev/null || redis_start ;;
  stop) stop_daemon redis 5 ;;
  restart) stop_daemon redis 5; redis_start ;;
  status) if pid=$(pid_of redis); then echo "redis running, pid $pid, port $REDIS_PORT"; else echo "redis not running"; exit 1; fi ;;
  *) die "usage: redis.sh start|stop|restart|status" ;;
esac
