#!/usr/bin/env bash
# shellcheck disable=SC2034 # tasks run none of the install arguments common.sh prepares
{% include "common.sh" %}
# tasks.sh TASK [key=value…]: the node's maintenance commands, by kURL's task names.
[ -n "${berth_words[0]:-}" ] || berth_fail "give a task: status, join-command (join_token), reset"
case "${berth_words[0]}" in
    status) exec "$berth_binary" status ;;
    join-command | join_token) exec "$berth_binary" join-command "${berth_params[@]+"${berth_params[@]}"}" ;;
    reset) exec "$berth_binary" reset ;;
    *) berth_fail "unknown task '${berth_words[0]}'; give status, join-command (join_token) or reset" ;;
esac
