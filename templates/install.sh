#!/usr/bin/env bash
{% include "common.sh" %}
berth_reject_words "give airgap, plan or key=value" "${berth_words[@]+"${berth_words[@]}"}"

if [ "$berth_plan_only" = 1 ]; then
    exec "$berth_binary" plan "${berth_install_arguments[@]}"
fi
exec "$berth_binary" install "${berth_install_arguments[@]}"
