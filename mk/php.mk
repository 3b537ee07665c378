# PHP binding (bindings/php, the Composer package libreserve/libreserve
# over FFI).  Included by the top-level Makefile (-include mk/*.mk).
#
#   make php-deps         Debian's php8.2-cli (it has FFI), phpunit,
#                         composer, and for the FPM test php8.2-fpm,
#                         nginx-light, wrk and curl (apt-get, as root, when
#                         missing); never fails: the tests skip what is
#                         missing and say why
#   make check-php        the PHPUnit suite against a throwaway MariaDB
#   make check-php-install
#                         the README's install lines (a Composer path
#                         repository, offline) into an application outside
#                         the tree, the library found through pkg-config
#                         after make install into a temp prefix, and the
#                         README's quick start run there
#   make check-php-fpm    the checkout endpoint under php-fpm8.2 behind
#                         nginx, driven by wrk (about 15 s)
#
# make check runs all three, php-deps before them.

PHP_PACKAGES := php8.2-cli phpunit composer php8.2-fpm nginx-light wrk curl

CHECK_EXTRA_BUILD += php-deps
CHECK_EXTRA += bindings/php/php-test.sh bindings/php/composer-install-test.sh bindings/php/fpm-test.sh

.PHONY: php-deps check-php check-php-install check-php-fpm

php-deps:
	@tools/deps.sh packages $(PHP_PACKAGES) || \
	  echo "php deps: some of $(PHP_PACKAGES) are missing: the PHP tests that need them will be skipped"

check-php: lib php-deps
	tools/mariadb.sh run bindings/php/php-test.sh

check-php-install: lib php-deps
	tools/mariadb.sh run bindings/php/composer-install-test.sh

check-php-fpm: lib php-deps
	tools/mariadb.sh run bindings/php/fpm-test.sh

# The older names.
.PHONY: php-test php-install-test php-fpm-test
php-test: check-php
php-install-test: check-php-install
php-fpm-test: check-php-fpm
