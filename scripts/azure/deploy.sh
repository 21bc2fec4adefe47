#!/usr/bin/env bash
# Creates the seeds' layout in Azure with the az CLI: a client scale set and a server scale set
# of netblast agents, in separate subnets of one VNet with a NAT gateway for their downloads,
# each instance running `netblast serve` (cloud-init.yaml) with a managed identity. Azure places
# the machines; netblast then runs one test across them:
#
#   scripts/azure/deploy.sh --rg perf --location westeurope --netblast-url URL --token-file T \
#       --clients 30 --servers 30 --size Standard_D4_v4 [--dry-run]
#   netblast fleet --clients azure:vmss=netblast-clients,rg=perf --servers azure:vmss=netblast-servers,rg=perf \
#       --token-file T --profile bulk-64flows -t 30s -o fleet.json
#
# Options:
#   --rg NAME --location REGION   resource group (created) and region          (required)
#   --netblast-url URL            where instances download the netblast binary  (required)
#   --token-file FILE             the agents' token, passed in the custom data, or
#   --keyvault VAULT --secret S   read from Key Vault by each instance's managed identity, which
#                                 is granted "Key Vault Secrets User" on the vault (an RBAC
#                                 vault: what `az keyvault create` makes since azure-cli 2.61)
#                                 or a get-secrets access policy (a vault that still uses them)
#   --keyvault-auth MODE          auto (default: asks the vault which it uses), rbac or policy
#   --clients N --servers N       instance counts (default 2 and 2)
#   --size SKU                    VM size of both sets (default Standard_D4_v4); --client-size,
#                                 --server-size for each
#   --orchestration-mode MODE     Flexible (default; what Azure recommends, and what az vmss
#                                 create makes unless told since azure-cli 2.55) or Uniform;
#                                 `fleet --clients azure:vmss=...` lists either
#   --outbound MODE               nat (default): a NAT gateway with one public IP for both
#                                 subnets, so instances can download netblast (subnets of new
#                                 VNets are private, and Flexible instances never had default
#                                 outbound access); none: the VNet already routes to the
#                                 internet (a firewall, a hub)
#   --image IMAGE                 default Ubuntu2204
#   --vnet CIDR                   the VNet (default 10.50.0.0/16; clients .1.0/24, servers .2.0/24)
#   --allow CIDR                  networks agents may send to (repeatable; default the VNet): add
#                                 the spokes on the far side of a firewall here
#   --register COORD:PORT         agents register with a coordinator (`fleet --listen`) instead
#                                 of being listed
#   --prefix NAME                 names: NAME-clients, NAME-servers, NAME-vnet (default netblast)
#   --dry-run                     print every az command instead of running it (a vault's
#                                 access mode is then taken as --keyvault-auth says, auto: rbac)
#   --render FILE                 also write the client instances' cloud-init to FILE
#
# Checked with azure-cli 2.91.0: every command printed parses in the CLI's own argument parser
# (scripts/check-deploy.sh runs them). That CLI creates VNets with Network API 2025-07-01
# (subnets private by default), scale sets with Compute API 2024-11-01. It cannot be tried from
# the machine netblast is developed on (no Azure there).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

RG="" LOCATION="" URL="" TOKEN_FILE="" VAULT="" SECRET="" CLIENTS=2 SERVERS=2
CLIENT_SIZE=Standard_D4_v4 SERVER_SIZE=Standard_D4_v4 IMAGE=Ubuntu2204 VNET=10.50.0.0/16
REGISTER="" PREFIX=netblast DRY=0 RENDER="" MODE=Flexible OUTBOUND=nat KV_AUTH=auto
ALLOW=()
die() { echo "deploy.sh: $*" >&2; exit 2; }
need() { if [ "$#" -lt 2 ] || [ -z "$2" ]; then die "$1 needs a value"; fi; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rg) need "$@"; RG=$2; shift 2 ;;
    --location) need "$@"; LOCATION=$2; shift 2 ;;
    --netblast-url) need "$@"; URL=$2; shift 2 ;;
    --token-file) need "$@"; TOKEN_FILE=$2; shift 2 ;;
    --keyvault) need "$@"; VAULT=$2; shift 2 ;;
    --secret) need "$@"; SECRET=$2; shift 2 ;;
    --keyvault-auth) need "$@"; KV_AUTH=$2; shift 2 ;;
    --orchestration-mode) need "$@"; MODE=$2; shift 2 ;;
    --outbound) need "$@"; OUTBOUND=$2; shift 2 ;;
    --clients) need "$@"; CLIENTS=$2; shift 2 ;;
    --servers) need "$@"; SERVERS=$2; shift 2 ;;
    --size) need "$@"; CLIENT_SIZE=$2; SERVER_SIZE=$2; shift 2 ;;
    --client-size) need "$@"; CLIENT_SIZE=$2; shift 2 ;;
    --server-size) need "$@"; SERVER_SIZE=$2; shift 2 ;;
    --image) need "$@"; IMAGE=$2; shift 2 ;;
    --vnet) need "$@"; VNET=$2; shift 2 ;;
    --allow) need "$@"; ALLOW+=("$2"); shift 2 ;;
    --register) need "$@"; REGISTER=$2; shift 2 ;;
    --prefix) need "$@"; PREFIX=$2; shift 2 ;;
    --render) need "$@"; RENDER=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[ -n "$RG" ] || die "--rg is required"
[ -n "$LOCATION" ] || die "--location is required"
[ -n "$URL" ] || die "--netblast-url is required (where instances download the binary)"
case "$URL" in
  https://*|http://*) ;;
  *) die "--netblast-url is an http(s) URL (got $URL)" ;;
esac
case "$URL" in *[\"\'\ \\]*) die "--netblast-url may not contain quotes, spaces or backslashes" ;; esac
case "$CLIENTS$SERVERS" in *[!0-9]*) die "--clients and --servers are counts" ;; esac
case "$MODE" in
  Flexible|flexible) MODE=Flexible ;;
  Uniform|uniform) MODE=Uniform ;;
  *) die "--orchestration-mode is Flexible or Uniform (got $MODE)" ;;
esac
case "$OUTBOUND" in nat|none) ;; *) die "--outbound is nat or none (got $OUTBOUND)" ;; esac
case "$KV_AUTH" in auto|rbac|policy) ;; *) die "--keyvault-auth is auto, rbac or policy (got $KV_AUTH)" ;; esac
if [ "$CLIENTS" -lt 1 ] || [ "$CLIENTS" -gt 1000 ]; then die "--clients is 1..1000"; fi
if [ "$SERVERS" -lt 1 ] || [ "$SERVERS" -gt 1000 ]; then die "--servers is 1..1000"; fi
[[ "$VNET" =~ ^([0-9]+)\.([0-9]+)\.0\.0/16$ ]] || die "--vnet is an IPv4 /16 ending in .0.0/16 (got $VNET)"
NET="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
for name in "$RG" "$PREFIX" "$VAULT" "$SECRET"; do
  [[ "$name" =~ ^[A-Za-z0-9._-]*$ ]] || die "names may hold letters, digits, '.', '_', '-' only (got $name)"
done
if [ -n "$VAULT" ] || [ -n "$SECRET" ]; then
  if [ -z "$VAULT" ] || [ -z "$SECRET" ]; then die "--keyvault and --secret go together"; fi
  [ -z "$TOKEN_FILE" ] || die "give --token-file or --keyvault/--secret, not both"
  TOKEN_SOURCE="keyvault:$VAULT/$SECRET" TOKEN_B64=""
else
  [ -n "$TOKEN_FILE" ] || die "the agents need a token: --token-file FILE or --keyvault VAULT --secret NAME"
  [ -r "$TOKEN_FILE" ] || die "cannot read $TOKEN_FILE"
  TOKEN_SOURCE=file TOKEN_B64=$(tr -d '\n' < "$TOKEN_FILE" | base64 -w0)
fi
[ "${#ALLOW[@]}" -gt 0 ] || ALLOW=("$VNET")
ALLOW_ARGS=""
for a in "${ALLOW[@]}"; do ALLOW_ARGS+=" --allow $a"; done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The custom data of one role: cloud-init.yaml with its placeholders filled.
render() {  # ROLE SERVE_ARGS OUT
  local esc_url esc_args
  esc_url=$(printf '%s' "$URL" | sed 's/[&|\\]/\\&/g')
  esc_args=$(printf '%s' "${2# }" | sed 's/[&|\\]/\\&/g')
  sed -e "s|@NETBLAST_URL@|$esc_url|" -e "s|@TOKEN_SOURCE@|$TOKEN_SOURCE|" \
      -e "s|@TOKEN_B64@|$TOKEN_B64|" -e "s|@SERVE_ARGS@|$esc_args|" "$HERE/cloud-init.yaml" > "$3"
}
reg() { [ -n "$REGISTER" ] && printf ' --register %s --group %s' "$REGISTER" "$1"; return 0; }
render clients "$(reg clients)$ALLOW_ARGS" "$WORK/clients.yaml"
render servers "--http 80 --https 443$(reg servers)$ALLOW_ARGS" "$WORK/servers.yaml"
if [ -n "$RENDER" ]; then cp "$WORK/clients.yaml" "$RENDER"; fi

run() {  # prints the command (shell-quoted), runs it unless --dry-run
  printf '+'; printf ' %q' "$@"; printf '\n'
  if [ "$DRY" = 0 ]; then "$@"; fi
}

# The id and the access mode of the vault: "true" for Azure RBAC, else access policies
# (older vaults may not say: they use policies).
vault_access() {
  if [ "$DRY" = 1 ]; then
    run az keyvault show --name "$VAULT" --query "[id, properties.enableRbacAuthorization]" --output tsv
    VAULT_ID="<id of vault $VAULT>"
    if [ "$KV_AUTH" = policy ]; then VAULT_RBAC=false; else VAULT_RBAC=true; fi
    [ "$KV_AUTH" != auto ] || echo "# (dry run: taking $VAULT as an RBAC vault, the default of new vaults; --keyvault-auth policy shows the other way)"
    return
  fi
  printf '+ az keyvault show --name %q --query %q --output tsv\n' "$VAULT" "[id, properties.enableRbacAuthorization]"
  local out
  out=$(az keyvault show --name "$VAULT" --query "[id, properties.enableRbacAuthorization]" --output tsv) \
    || die "cannot read Key Vault $VAULT (does it exist, and may this account read it?)"
  VAULT_ID=$(printf '%s\n' "$out" | sed -n 1p)
  VAULT_RBAC=$(printf '%s\n' "$out" | sed -n 2p)
  case "$KV_AUTH" in
    rbac) VAULT_RBAC=true ;;
    policy) VAULT_RBAC=false ;;
  esac
  if [ "$VAULT_RBAC" = true ]; then echo "# $VAULT uses Azure RBAC: granting Key Vault Secrets User"; else echo "# $VAULT uses access policies: adding a get-secrets policy"; fi
}

# Lets a scale set's managed identity read the token from the vault.
grant_vault() {  # SCALE_SET
  local principal
  if [ "$DRY" = 1 ]; then
    principal="<principalId of $1>"
    run az vmss identity show --resource-group "$RG" --name "$1" --query principalId --output tsv
  else
    printf '+ az vmss identity show --resource-group %q --name %q --query principalId --output tsv\n' "$RG" "$1"
    principal=$(az vmss identity show --resource-group "$RG" --name "$1" --query principalId --output tsv)
  fi
  if [ "$VAULT_RBAC" = true ]; then
    run az role assignment create --assignee-object-id "$principal" --assignee-principal-type ServicePrincipal \
      --role "Key Vault Secrets User" --scope "$VAULT_ID" --output none
  else
    run az keyvault set-policy --name "$VAULT" --object-id "$principal" --secret-permissions get --output none
  fi
}

run az group create --name "$RG" --location "$LOCATION" --output none
run az network vnet create --resource-group "$RG" --name "$PREFIX-vnet" --address-prefixes "$VNET" \
  --subnet-name clients --subnet-prefixes "$NET.1.0/24" --output none
run az network vnet subnet create --resource-group "$RG" --vnet-name "$PREFIX-vnet" --name servers \
  --address-prefixes "$NET.2.0/24" --output none
if [ "$OUTBOUND" = nat ]; then
  run az network public-ip create --resource-group "$RG" --name "$PREFIX-nat-ip" --sku Standard \
    --allocation-method Static --output none
  run az network nat gateway create --resource-group "$RG" --name "$PREFIX-nat" \
    --public-ip-addresses "$PREFIX-nat-ip" --idle-timeout 10 --output none
  for subnet in clients servers; do
    run az network vnet subnet update --resource-group "$RG" --vnet-name "$PREFIX-vnet" --name "$subnet" \
      --nat-gateway "$PREFIX-nat" --output none
  done
fi
if [ -n "$VAULT" ]; then vault_access; fi
for role in clients servers; do
  if [ "$role" = clients ]; then count=$CLIENTS size=$CLIENT_SIZE; else count=$SERVERS size=$SERVER_SIZE; fi
  run az vmss create --resource-group "$RG" --name "$PREFIX-$role" --orchestration-mode "$MODE" \
    --image "$IMAGE" --vm-sku "$size" \
    --instance-count "$count" --vnet-name "$PREFIX-vnet" --subnet "$role" \
    --custom-data "$WORK/$role.yaml" --assign-identity --admin-username netblast --generate-ssh-keys \
    --upgrade-policy-mode automatic --accelerated-networking true --public-ip-address "" --load-balancer "" \
    --tags "netblast=agent" "role=$role" --output none
  if [ -n "$VAULT" ]; then grant_vault "$PREFIX-$role"; fi
done

echo
echo "# Agents are up when each instance's netblast-agent.service runs. Then, from a coordinator"
echo "# that can reach both subnets (Reader on $RG for azure: lists):"
tok=${TOKEN_FILE:-TOKEN_FILE}
if [ -n "$REGISTER" ]; then
  echo "netblast fleet --listen 0.0.0.0:${REGISTER##*:} --clients registered:clients:$CLIENTS --servers registered:servers:$SERVERS --token-file $tok --profile bulk-64flows -t 30s -o fleet.json"
else
  echo "netblast fleet --clients azure:vmss=$PREFIX-clients,rg=$RG --servers azure:vmss=$PREFIX-servers,rg=$RG --token-file $tok --profile bulk-64flows -t 30s -o fleet.json"
fi
