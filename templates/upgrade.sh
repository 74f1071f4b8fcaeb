#!/usr/bin/env bash
{% include "common.sh" %}
berth_pass_words "${berth_words[@]+"${berth_words[@]}"}"

# An upgrade is an install of the spec's newer versions: each add-on whose version moved goes
# through Upgrading, the others stay as they are. As kURL's upgrade, a node that joined the
# cluster runs each add-on's join hooks, the runtime's install first.
if [ "$berth_plan_only" = 1 ]; then
    "$berth_binary" plan "${berth_install_arguments[@]}" < <(berth_print_params)
    return
fi
exec "$berth_binary" upgrade "${berth_install_arguments[@]}" < <(berth_print_params)
}

berth_main "$@"
