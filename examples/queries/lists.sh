#!/usr/bin/env bash
# List queries against a running server: filters, sort, fields, cursors, counts, CSV and
# changed_by. Loads the example uploads first (campaigns, then markers named by key).
#
#   PASSWORD=<admin password> examples/queries/lists.sh [http://127.0.0.1:8080]
set -euo pipefail
cd "$(dirname "$0")/../.."
base="${1:-http://127.0.0.1:8080}"
auth="admin:${PASSWORD:?set PASSWORD to the admin password}"
show() { # the count, the next page and the body; -g: brackets are no URL globs
  echo "+ GET $1"
  curl -sg -u "$auth" -D - "$base$1" | tr -d '\r' |
    awk 'body { print; next } /^$/ { body = 1; next } tolower($0) ~ /^(x-total-count|link):/'
  echo
}

curl -sf -u "$auth" -F entity=campaigns -F csvfile=@examples/uploads/campaigns.csv \
  "$base/tools/uploader.ex.php" >/dev/null
rid=$(curl -sf -u "$auth" -F entity=markers -F bgrs=1 -F csvfile=@examples/uploads/markers-by-key.csv \
  "$base/tools/uploader.ex.php" | sed -E 's/.*"request":"([0-9a-f]+)".*/\1/')
until curl -sf -u "$auth" "$base/bgrs/$rid" | grep -q '"status_id":"4"'; do sleep 0.2; done

# Equality, a comparison and a case-insensitive text search, highest page first, two columns.
show '/markers?campaign_id=1&page[gte]=1&name[contains]=COVER&sort=-page,name&fields=id,name,page'
# One of several values; a page of one with the cursor of the next in `Link`.
show '/campaigns?type[in]=1,2&sort=name&limit=1'
# Not equal (nulls match too), as CSV.
show '/campaigns?description[ne]=x&fields=id,name,description&t=csv'
# What the markers upload created or changed.
show "/markers?changed_by=$rid&fields=id,name"
# Mistakes are 400s that name the parameter and the nearest known name.
show '/markers?pge[gt]=3'
show '/markers?page[gtt]=3'
