#!/usr/bin/env bash
{% include "common.sh" %}
berth_pass_words "${berth_words[@]+"${berth_words[@]}"}"
[ "$berth_allow_downgrade" = 0 ] || berth_fail "allow-downgrade is for install.sh and upgrade.sh; a joining node takes the versions the cluster has"

# The key=value pairs are the join parameters the first node printed (control-plane came in
# as control-plane=1).
berth_join_arguments=(
    --spec "$berth_spec_file"
    "${berth_trust_arguments[@]+"${berth_trust_arguments[@]}"}"
    --params-from-stdin
)
if [ -n "$berth_bundle_file" ]; then
    [ -f "$berth_bundle_file" ] || berth_fail "bundle=$berth_bundle_file: no such file"
    berth_join_arguments+=(--bundle "$berth_bundle_file")
else
    berth_join_arguments+=(--lock "$berth_lock_file" --dist "$berth_dist")
fi
if [ "$berth_airgap" = 0 ]; then
    berth_join_arguments+=(--scripts-url "$BERTH_SCRIPTS_URL")
fi
if [ "$berth_force_reapply" = 1 ]; then
    berth_join_arguments+=(--force-reapply)
fi
berth_join_arguments+=("${berth_timeout_arguments[@]+"${berth_timeout_arguments[@]}"}")
if [ "$berth_plan_only" = 1 ]; then
    "$berth_binary" join --dry-run "${berth_join_arguments[@]}" < <(berth_print_params)
    return
fi
exec "$berth_binary" join "${berth_join_arguments[@]}" < <(berth_print_params)
}

berth_main "$@"
