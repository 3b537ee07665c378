<?php
/*
 * preload.php - the opcache.preload script for PHP-FPM with
 * ffi.enable=preload (PHP's default): under that setting PHP lets only
 * preloaded code call FFI, so the package's classes are preloaded here;
 * the library itself comes from ffi.preload (bin/libreserve-ffi-preload).
 * In php.ini (the FPM one):
 *
 *   ffi.preload=/etc/php/8.2/fpm/libreserve-ffi.h
 *   opcache.enable=1
 *   opcache.preload=/path/to/vendor/libreserve/libreserve/preload.php
 *   opcache.preload_user=www-data
 */

declare(strict_types=1);

require __DIR__ . '/autoload.php';

$src = __DIR__ . '/src';
$files = new RecursiveIteratorIterator(new RecursiveDirectoryIterator($src, FilesystemIterator::SKIP_DOTS));
foreach ($files as $file) {
    if ($file->getExtension() === 'php') {
        // through the autoloader, so that parents come first and every
        // class is linked (opcache preloads only linked classes)
        $class = 'Libreserve\\' . str_replace('/', '\\', substr($file->getPathname(), strlen($src) + 1, -4));
        class_exists($class) || interface_exists($class) || enum_exists($class);
    }
}
