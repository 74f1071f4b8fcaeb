#!/usr/bin/env bash
# shellcheck disable=SC2034 # tasks run none of the install arguments common.sh prepares
{% include "common.sh" %}
# tasks.sh TASK [key=value…]: the node's maintenance commands, by kURL's task names.
[ "$berth_allow_downgrade" = 0 ] || berth_fail "allow-downgrade is for install.sh and upgrade.sh"
[ "$berth_force_reapply" = 0 ] || berth_fail "force-reapply is for install.sh, join.sh and upgrade.sh"
[ -n "${berth_words[0]:-}" ] || berth_fail "give a task: status, join-command (join_token [ha] [airgap]), reset"
case "${berth_words[0]}" in
    status) exec "$berth_binary" status ;;
    join-command | join_token)
        berth_join_command=(join-command)
        for berth_word in "${berth_words[@]:1}"; do
            case "$berth_word" in
                ha | control-plane) berth_join_command+=(--control-plane) ;;
                *) berth_fail "join_token takes ha (or control-plane); not '$berth_word'" ;;
            esac
        done
        if [ "$berth_airgap" = 1 ]; then
            berth_join_command+=(--airgap)
        fi
        exec "$berth_binary" "${berth_join_command[@]}"
        ;;
    reset) exec "$berth_binary" reset ;;
    *) berth_fail "unknown task '${berth_words[0]}'; give status, join-command (join_token) or reset" ;;
esac
}

berth_main "$@"
