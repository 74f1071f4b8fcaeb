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
