#!/bin/sh
# Host discovery for elastic Horovod on one machine: print one `host:slots` line per host that
# may run workers now; horovodrun runs this script every second.
#
# This machine is listed under two names, one slot each. When a worker fails, Horovod stops
# using its *host* for good (it blacklists it); with two names, the other worker's "host" is
# still there and training goes on with one worker instead of stopping.
echo "localhost:1"
echo "127.0.0.1:1"
