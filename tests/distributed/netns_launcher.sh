#!/bin/sh
# The "remote shell" of the two-host test: MPICH's mpiexec (hydra's ssh launcher, given this
# file as -launcher-exec) calls it as `netns_launcher.sh -x HOST "proxy" ARGS...`, and it runs
# the proxy in the network namespace that plays HOST (LUCID_NETNS_HOSTS="addr=ns addr=ns").
[ "$1" = "-x" ] && shift
host=$1
shift
for pair in $LUCID_NETNS_HOSTS; do
    if [ "${pair%%=*}" = "$host" ]; then
        exec ip netns exec "${pair#*=}" sh -c "$*"
    fi
done
echo "netns_launcher.sh: no namespace plays host $host (LUCID_NETNS_HOSTS=$LUCID_NETNS_HOSTS)" >&2
exit 1
