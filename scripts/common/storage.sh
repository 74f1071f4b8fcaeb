# shellcheck shell=bash
# kURL's storage helpers that add-ons share (Rook, Longhorn, OpenEBS, Velero): the host's NFS
# and iSCSI services, and the small kubectl steps around EKCO and storage migrations.

# __berth_ensure_service_package SERVICE DIR YUM_PACKAGE APT_PACKAGE: unless SERVICE is a
# systemd unit already, installs its package (online where kURL ships none, else from DIR's
# archives); then starts and enables SERVICE.
function __berth_ensure_service_package() {
    local service="$1" src="$2" yum_package="$3" apt_package="$4"
    if ! systemctl list-units 2>/dev/null | grep -q "$service"; then
        if ! host_packages_shipped; then
            ensure_host_package "$yum_package" "$apt_package"
        else
            case "${LSB_DIST:-}" in
                ubuntu | debian) dpkg_install_host_archives "$src" "$apt_package" ;;
                centos | rhel | ol | rocky | almalinux | amzn) yum_install_host_archives "$src" "$yum_package" ;;
            esac
        fi
    fi
    if ! systemctl -q is-active "$service"; then
        systemctl start "$service"
    fi
    if ! systemctl -q is-enabled "$service"; then
        systemctl enable "$service"
    fi
}

# install_nfs_utils_if_missing_common DIR: makes sure the NFS client (nfs-utils, nfs-common)
# is installed, started and enabled.
function install_nfs_utils_if_missing_common() {
    __berth_ensure_service_package nfs-utils "$1" nfs-utils nfs-common
}

# longhorn_install_iscsi_if_missing_common DIR: makes sure the iSCSI initiator
# (iscsi-initiator-utils, open-iscsi) is installed, started and enabled.
function longhorn_install_iscsi_if_missing_common() {
    __berth_ensure_service_package iscsid "$1" iscsi-initiator-utils open-iscsi
}

# longhorn_host_init_common DIR: prepares a Longhorn node: iSCSI, NFS and /var/lib/longhorn.
function longhorn_host_init_common() {
    longhorn_install_iscsi_if_missing_common "$1"
    install_nfs_utils_if_missing_common "$1"
    mkdir -p /var/lib/longhorn
    chmod 700 /var/lib/longhorn
}

# rook_disable_ekco_operator: scales EKCO's operator to 0 and waits up to 2 minutes for its pods
# to go; returns 1 if they do not.
function rook_disable_ekco_operator() {
    if ! kubernetes_resource_exists kurl deployment ekc-operator; then
        return 0
    fi
    log "Scaling down EKCO deployment to 0 replicas"
    kubernetes_scale_down kurl deployment ekc-operator
    log "Waiting for ekco pods to be removed"
    if ! spinner_until 120 ekco_pods_gone; then
        logFail "Unable to scale down ekco operator"
        return 1
    fi
}

# rook_enable_ekco_operator: scales EKCO's operator back to 1 replica.
function rook_enable_ekco_operator() {
    if kubernetes_resource_exists kurl deployment ekc-operator; then
        echo "Scaling up EKCO deployment to 1 replica"
        kubernetes_scale kurl deployment ekc-operator 1
    fi
}

# current_ceph_version: prints the Ceph version Rook's first manager runs (x.y.z).
function current_ceph_version() {
    kubectl -n rook-ceph get deployment rook-ceph-mgr-a -o jsonpath='{.metadata.labels.ceph-version}' 2>/dev/null |
        awk -F'-' '{ print $1 }'
}

# __berth_record_rook_migration KEY: sets KEY=1 in the kurl/kurl-migration-from-rook configmap
# (creating it) and exports KEY=1.
function __berth_record_rook_migration() {
    if ! kubectl -n kurl get configmap kurl-migration-from-rook >/dev/null 2>&1; then
        log "Creating ConfigMap to track status of migration from Rook"
        kubectl create configmap kurl-migration-from-rook -n kurl
    fi
    kubectl patch configmap kurl-migration-from-rook -n kurl --type merge -p "{\"data\":{\"$1\":\"1\"}}"
    export "$1=1"
}

# add_rook_pvc_migration_status: records that Rook's volumes were migrated
# (DID_MIGRATE_ROOK_PVCS=1, in the cluster and the environment).
function add_rook_pvc_migration_status() {
    __berth_record_rook_migration DID_MIGRATE_ROOK_PVCS
}

# add_rook_store_object_migration_status: records that Rook's object store was migrated
# (DID_MIGRATE_ROOK_OBJECT_STORE=1).
function add_rook_store_object_migration_status() {
    __berth_record_rook_migration DID_MIGRATE_ROOK_OBJECT_STORE
}

# kURL's storage migrations (rook_ceph_to_sc_migration, longhorn_to_sc_migration,
# migrate_rgw_to_minio, migrate_minio_to_rgw, migrate_between_object_stores,
# migrate_object_store) move a cluster's volumes and objects with pvmigrate and kURL's
# kurl-util image, neither of which Berth has. Each is refused before it changes anything
# (kURL's scale EKCO and Prometheus down first), naming what it would have moved.
function __berth_refuse_migration() {
    bail "$1: moving data between storage add-ons (kURL's $2) is not something Berth does; nothing was changed. Keep the spec's current storage add-on, or migrate with kURL first."
}
function rook_ceph_to_sc_migration() {
    __berth_refuse_migration "Rook's volumes to storage class ${1:-?}" rook_ceph_to_sc_migration
}
function longhorn_to_sc_migration() {
    __berth_refuse_migration "Longhorn's volumes to storage class ${1:-?}" longhorn_to_sc_migration
}
function migrate_rgw_to_minio() {
    __berth_refuse_migration "Rook's object store to MinIO" migrate_rgw_to_minio
}
function migrate_minio_to_rgw() {
    __berth_refuse_migration "MinIO's objects to Rook" migrate_minio_to_rgw
}
function migrate_between_object_stores() {
    __berth_refuse_migration "objects from ${1:-?} to ${4:-?}" migrate_between_object_stores
}
function migrate_object_store() {
    __berth_refuse_migration "objects from ${2:-?} to ${5:-?}" migrate_object_store
}

# __berth_storage_stays NAME NAMESPACE VERSION: kURL's cleanup after a migration away from a
# storage add-on. Nothing unless the spec dropped it (VERSION empty) and the cluster still has
# its NAMESPACE; kURL then removes it once its data was migrated. Berth migrates nothing and
# removes nothing: it says what kURL says when the migration is not complete, and that the
# add-on stays. Returns 0, as kURL's do.
function __berth_storage_stays() {
    [ -z "$3" ] || return 0
    kubectl get ns 2>/dev/null | grep -q "$2" || return 0
    logStep "Removing $1"
    logFail "Unable to remove $1: Berth does not migrate $1's data, nor remove $1; it stays in the cluster."
    return 0
}

# maybe_cleanup_rook: kURL's, for Rook (its namespace rook-ceph).
function maybe_cleanup_rook() {
    __berth_storage_stays Rook rook-ceph "${ROOK_VERSION:-}"
}

# maybe_cleanup_longhorn: kURL's, for Longhorn (its namespace longhorn-system).
function maybe_cleanup_longhorn() {
    __berth_storage_stays Longhorn longhorn-system "${LONGHORN_VERSION:-}"
}

# __berth_rook_pods_running: waits up to 5 minutes for every pod of rook-ceph to run.
function __berth_rook_pods_running() {
    log "Awaiting up to 5 minutes to check Rook Ceph Pod(s) are Running"
    if ! spinner_until 300 check_for_running_pods rook-ceph; then
        logFail "Rook Ceph has unhealthy Pod(s):${UNHEALTHY_PODS:-}"
        return 1
    fi
}

# __berth_rook_wait_for_health: waits up to 10 minutes for Ceph to be healthy (kURL's program,
# `kurl rook wait-for-health`); when it is not, prints Ceph's status and returns 1.
function __berth_rook_wait_for_health() {
    log "Awaiting up to 10 minutes to check that Rook Ceph is healthy"
    if ! "$DIR"/bin/kurl rook wait-for-health 600; then
        kubectl -n rook-ceph exec deploy/rook-ceph-tools -- ceph status || true
        logFail "Rook Ceph is unhealthy"
        return 1
    fi
}

# __berth_rook_one_version LABEL: whether Rook's deployments (label rook_cluster=rook-ceph) all
# carry the same LABEL (rook-version, ceph-version); prints each one's replicas and LABEL.
# Two Ceph versions of which one is 0.0.0-0 pass: Rook before 1.4.8 labelled some so.
function __berth_rook_one_version() {
    local label="$1" found
    kubectl -n rook-ceph get deployment -l rook_cluster=rook-ceph -o jsonpath="{range .items[*]}{.metadata.name}{\"  \\treq/upd/avl: \"}{.spec.replicas}{\"/\"}{.status.updatedReplicas}{\"/\"}{.status.readyReplicas}{\"  \\t$label=\"}{.metadata.labels.$label}{\"\\n\"}{end}"
    found="$(kubectl -n rook-ceph get deployment -l rook_cluster=rook-ceph -o jsonpath="{range .items[*]}{\"$label=\"}{.metadata.labels.$label}{\"\\n\"}{end}" | sort | uniq)"
    if [ -z "$found" ] || [ "$(echo "$found" | wc -l)" -le 1 ]; then
        return 0
    fi
    if [ "$label" = ceph-version ] && [ "$(echo "$found" | wc -l)" -eq 2 ] && echo "$found" | grep -q "0.0.0-0"; then
        log "Found two ceph versions but one of them is 0.0.0-0 which will be ignored"
        echo "$found"
        return 0
    fi
    if [ "$label" = ceph-version ]; then
        logFail "Multiple Ceph versions detected"
    else
        logFail "Multiple Rook versions detected"
    fi
    logFail "$found"
    return 1
}

# rook_is_healthy_to_upgrade: whether Rook's Ceph may be upgraded: every pod of rook-ceph
# running, Ceph healthy, and one Rook version and one Ceph version across its deployments.
function rook_is_healthy_to_upgrade() {
    __berth_rook_pods_running || return 1
    __berth_rook_wait_for_health || return 1
    log "Checking Rook Ceph versions and replicas"
    __berth_rook_one_version rook-version || return 1
    log "Checking Ceph versions and replicas"
    __berth_rook_one_version ceph-version
}

# __berth_rook_disable_failed_modules: when Ceph says its dashboard or prometheus manager
# module failed (kURL saw it after volumes were moved off Rook), disables both: Rook is being
# removed, and they keep Ceph from being healthy. Whether it disabled them.
function __berth_rook_disable_failed_modules() {
    local status
    status="$(kubectl -n rook-ceph exec deploy/rook-ceph-tools -- ceph status 2>/dev/null || true)"
    if [[ "$status" != *"Module 'dashboard'"* ]] && [[ "$status" != *"Module 'prometheus'"* ]]; then
        return 1
    fi
    log "Disabling Ceph manager modules in order to get Ceph healthy again."
    kubectl -n rook-ceph exec deploy/rook-ceph-tools -- ceph mgr module disable prometheus || true
    kubectl -n rook-ceph exec deploy/rook-ceph-tools -- ceph mgr module disable dashboard || true
}

# rook_is_healthy_to_migrate_from: rook_is_healthy_to_upgrade, before data moves off Rook;
# failed dashboard and prometheus modules are disabled. kURL disables them only after ten
# minutes of waiting, then fails anyway; Berth looks first, and goes on once Ceph is healthy.
function rook_is_healthy_to_migrate_from() {
    __berth_rook_pods_running || return 1
    __berth_rook_disable_failed_modules || true
    if ! __berth_rook_wait_for_health; then
        __berth_rook_disable_failed_modules || return 1
        log "Verify Rook Ceph health after try to fix"
        __berth_rook_wait_for_health || return 1
    fi
    log "Checking Rook Ceph versions and replicas"
    __berth_rook_one_version rook-version || return 1
    log "Checking Ceph versions and replicas"
    __berth_rook_one_version ceph-version
}

# longhorn_prepare_for_migration: checks Longhorn's volumes and nodes are healthy for a
# migration (on one node, its volumes first scaled to one replica: `kurl longhorn
# prepare-for-migration`). When that fails, offers to put the replicas back; returns 1.
function longhorn_prepare_for_migration() {
    if "$DIR"/bin/kurl longhorn prepare-for-migration; then
        return 0
    fi
    logFail "Preparation for longhorn migration failed. Please review the preceding messages for further details."
    logFail "During the preparation for Longhorn, some replicas may have been scaled down. Would you like to"
    logFail "restore the system to its original state?"
    if confirmY; then
        log "Restoring Longhorn replicas to their original state"
        longhorn_restore_migration_replicas
    fi
    return 1
}

# longhorn_restore_migration_replicas: scales Longhorn's volumes, and the Deployments and
# StatefulSets scaled down for a migration, back to the counts they kept.
function longhorn_restore_migration_replicas() {
    "$DIR"/bin/kurl longhorn rollback-migration-replicas
}
