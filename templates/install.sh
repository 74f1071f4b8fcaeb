#!/usr/bin/env bash
{% include "common.sh" %}
berth_pass_words "${berth_words[@]+"${berth_words[@]}"}"

berth_command=install
if [ "$berth_plan_only" = 1 ]; then
    berth_command=plan
    "$berth_binary" "$berth_command" "${berth_install_arguments[@]}" < <(berth_print_params)
    return
fi
exec "$berth_binary" "$berth_command" "${berth_install_arguments[@]}" < <(berth_print_params)
}

berth_main "$@"
