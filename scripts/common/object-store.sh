# shellcheck shell=bash
# kURL's object store helpers: whether the cluster's S3 store (Rook's or MinIO's) is configured
# or running, and creating a bucket in it with a signed S3 request, as the registry add-on does.

# object_store_exists: whether OBJECT_STORE_ACCESS_KEY, OBJECT_STORE_SECRET_KEY and
# OBJECT_STORE_CLUSTER_IP are all set.
function object_store_exists() {
    [ -n "${OBJECT_STORE_ACCESS_KEY:-}" ] && [ -n "${OBJECT_STORE_SECRET_KEY:-}" ] &&
        [ -n "${OBJECT_STORE_CLUSTER_IP:-}" ]
}

# object_store_running: whether Rook's object store user secret exists in the cluster. (kURL
# also tests MinIO's credentials with a misspelt kubectl call that never matches; so does this.)
function object_store_running() {
    kubernetes_resource_exists rook-ceph secret rook-ceph-object-user-rook-ceph-store-kurl ||
        kubernetes_resource_exists minio get secret minio-credentials
}

# __berth_object_store_request METHOD BUCKET [CURL_OPTION…]: sends an S3 request signed with
# OBJECT_STORE_ACCESS_KEY/SECRET_KEY (AWS signature version 2) for BUCKET to
# http://OBJECT_STORE_CLUSTER_IP/BUCKET; fails unless the store answers with success.
function __berth_object_store_request() {
    local method="$1" bucket="$2"
    shift 2
    local acl="x-amz-acl:private" date signature address="${OBJECT_STORE_CLUSTER_IP:-}"
    date="$(LC_TIME="en_US.UTF-8" TZ="UTC" date +"%a, %d %b %Y %T %z")"
    signature="$(printf '%s\n\n\n%s\n%s\n/%s' "$method" "$date" "$acl" "$bucket" |
        openssl dgst -sha1 -hmac "${OBJECT_STORE_SECRET_KEY:-}" -binary | base64)"
    if [[ "$address" == *:* ]]; then
        address="[$address]"
    fi
    curl -fsSL --globoff --noproxy "*" "$@" \
        -H "Host: ${OBJECT_STORE_CLUSTER_IP:-}" \
        -H "Date: $date" \
        -H "$acl" \
        -H "Authorization: AWS ${OBJECT_STORE_ACCESS_KEY:-}:$signature" \
        "http://$address/$bucket" >/dev/null 2>&1
}

# object_store_bucket_exists BUCKET: whether the object store has BUCKET (a signed HEAD).
function object_store_bucket_exists() {
    __berth_object_store_request HEAD "$1" -I
}

# _object_store_create_bucket BUCKET: creates BUCKET, private (a signed PUT).
function _object_store_create_bucket() {
    __berth_object_store_request PUT "$1" -X PUT
}

# object_store_create_bucket BUCKET: makes sure BUCKET exists and says so on stdout; when the
# creation fails, returns 1 if an object store is configured (try_1m retries), else bails.
function object_store_create_bucket() {
    if object_store_bucket_exists "$1"; then
        echo "object store bucket $1 exists"
        return 0
    fi
    if ! _object_store_create_bucket "$1"; then
        if object_store_exists; then
            return 1
        fi
        bail "attempted to create bucket $1 but no object store configured"
    fi
    echo "object store bucket $1 created"
}
