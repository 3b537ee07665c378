# Node.js package (bindings/node, the npm package `libreserve` over koffi).
# Included by the top-level Makefile (-include mk/*.mk).
#
#   make node-deps    node and npm (apt-get install nodejs npm, as root, when
#                     node is missing), then npm install in bindings/node
#                     (koffi, and typescript for the type test) when
#                     node_modules is missing or older than package.json;
#                     never fails: the tests skip what is missing
#   make check-node    its tests (node --test) against a throwaway MariaDB
#
# make check does both: node-deps before the tests, bindings/node/node-test.sh
# among them.

CHECK_EXTRA_BUILD += node-deps
CHECK_EXTRA += bindings/node/node-test.sh

.PHONY: node-deps check-node

node-deps:
	@bindings/node/deps.sh

check-node: lib node-deps
	tools/mariadb.sh run bindings/node/node-test.sh

# The older names of the targets above.
.PHONY: node-test
node-test: check-node
