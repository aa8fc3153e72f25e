#!/usr/bin/env bash
# ansible-test sanity on a copy of the collection laid out as ansible_collections/raygate/cluster.
# ansible-test insists that the working directory *is* such a tree, so a symlink will not do.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${VENV:-$root/.venv}
# One tree per venv: `make test` runs the sanity of 2.19 (fast) and of 2.16 (compat) side by side.
tree=$root/.build/sanity/$(basename "$venv")/ansible_collections/raygate/cluster
# ansible-test pins the pip it bootstraps (pip='24.2' in 2.19); read it rather than guess.
req=$("$venv/bin/python" -c 'import ansible_test, os; print(os.path.join(os.path.dirname(ansible_test.__file__), "_internal", "python_requirements.py"))')
pip_version=$(grep -oP "pip='\K[0-9.]+" "$req" | head -n1)
cache=$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py
mkdir -p "$(dirname "$cache")"
# Written aside and renamed: the other run may read it meanwhile.
cp "$root/tests/sanity/get_pip_shim.py" "$cache.$$" && mv -f "$cache.$$" "$cache"

rm -rf "$tree"
mkdir -p "$tree"
# Only what git would ship: tracked files plus untracked ones that are not ignored.
(cd "$root" && git ls-files -co --exclude-standard -z | rsync -a --from0 --files-from=- --ignore-missing-args ./ "$tree/")
cd "$tree"
git init -q . && git add -A >/dev/null
exec "$venv/bin/ansible-test" sanity --venv --python 3.11 --color no "$@"
