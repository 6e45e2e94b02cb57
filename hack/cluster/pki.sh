#!/usr/bin/env bash
# Generates the cluster's CA, certificates, service-account key pair and kubeconfigs under
# $STATE/pki and $STATE/*.kubeconfig with openssl. Idempotent: does nothing when
# $STATE/pki/.complete matches the node name and API port. Called by up.sh.
source "$(dirname "$0")/lib.sh"

stamp="node=$NODE_NAME api=$API_PORT"
if [ -f "$PKI/.complete" ] && [ "$(cat "$PKI/.complete")" = "$stamp" ] && [ -f "$KUBECONFIG_ADMIN" ]; then
  exit 0
fi
log "generating PKI and kubeconfigs in $STATE"
rm -rf "$PKI"; mkdir -p "$PKI"; chmod 700 "$PKI"
cd "$PKI"

openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout ca.key -out ca.crt \
  -days 3650 -subj "/CN=lockedcron-local-ca" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null

cert() { # NAME SUBJECT USAGE [SANS]
  local name=$1 subj=$2 usage=$3 sans=${4:-}
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -n "$sans" ] && echo "subjectAltName=$sans"
  } >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -sha256 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
cert apiserver "/CN=kube-apiserver" serverAuth \
  "IP:127.0.0.1,IP:$SERVICE_API_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=lockedcron-admin" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
cert kubelet-serving "/CN=$NODE_NAME" serverAuth "IP:127.0.0.1,DNS:$NODE_NAME,DNS:localhost"
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
chmod 600 ./*.key

kubeconfig() { # FILE USER CERTNAME
  local b64='base64 -w0'
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: lockedcron
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $($b64 <ca.crt)
users:
- name: $2
  user:
    client-certificate-data: $($b64 <"$3.crt")
    client-key-data: $($b64 <"$3.key")
contexts:
- name: lockedcron
  context:
    cluster: lockedcron
    user: $2
current-context: lockedcron
KC
  chmod 600 "$1"
}
kubeconfig "$STATE/controller-manager.kubeconfig" system:kube-controller-manager controller-manager
kubeconfig "$STATE/scheduler.kubeconfig" system:kube-scheduler scheduler
kubeconfig "$STATE/kubelet.kubeconfig" "system:node:$NODE_NAME" kubelet
kubeconfig "$KUBECONFIG_ADMIN.tmp" lockedcron-admin admin
mv "$KUBECONFIG_ADMIN.tmp" "$KUBECONFIG_ADMIN"
echo "$stamp" >"$PKI/.complete"
