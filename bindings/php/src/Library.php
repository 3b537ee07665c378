<?php
/*
 * Library.php - finds libreserve.so and loads it through FFI, once per
 * request (or once per FPM master when preloaded), and says exactly what
 * is missing when it cannot.
 */

declare(strict_types=1);

namespace Libreserve;

use FFI;
use Libreserve\Exception\FfiUnavailable;
use Libreserve\Exception\LibraryNotFound;

/**
 * Where libreserve.so comes from, first match wins:
 *  1. the environment variable LIBRESERVE_PATH: the library file, or a
 *     directory holding libreserve.so.0 (or libreserve.so);
 *  2. the directory `pkg-config --variable=libdir reserve` reports (the
 *     installed reserve.pc);
 *  3. libreserve.so.0 as the system's dynamic loader finds it
 *     (ldconfig cache, LD_LIBRARY_PATH).
 * A library preloaded under the FFI scope "LIBRESERVE" (ffi.preload, for
 * PHP-FPM: see {@see Library::preloadHeader()}) is used before any of them.
 */
final class Library
{
    /** The FFI scope a preload script registers (FFI::scope). */
    public const SCOPE = 'LIBRESERVE';

    /** The libreserve release this package was written for. */
    public const HEADER_VERSION = '0.1.0';
    public const HEADER_VERSION_NUMBER = 100;

    private static ?FFI $ffi = null;
    private static ?string $path = null;

    private function __construct()
    {
    }

    /** The loaded library's FFI instance; loads it on first use. */
    public static function ffi(): FFI
    {
        return self::$ffi ?? self::load();
    }

    /**
     * The file loaded ("libreserve.so.0" when the system loader found it,
     * "preloaded" when it came from the preload scope).
     */
    public static function path(): string
    {
        self::ffi();
        return (string) self::$path;
    }

    /** The declarations handed to FFI. */
    public static function headerFile(): string
    {
        return __DIR__ . '/libreserve.h';
    }

    /**
     * The declarations with the two lines ffi.preload needs: the scope
     * "LIBRESERVE" and the library found as above (the first place that
     * loads).  bin/libreserve-ffi-preload writes it to a file for php.ini:
     *
     *   ffi.preload=/etc/php/8.2/fpm/libreserve-ffi.h
     *
     * PHP then loads the library once, at start-up, in every SAPI that
     * reads that ini, and each request of each worker takes it from the
     * scope, with ffi.enable=preload (PHP's default), parsing nothing.
     */
    public static function preloadHeader(): string
    {
        $ffi = self::ffi();
        unset($ffi);
        $path = (string) self::$path;
        if ($path === 'preloaded') {
            throw new LibraryNotFound('the library is already preloaded here; run this with ffi.preload unset (php -d ffi.preload=)');
        }
        return sprintf("#define FFI_SCOPE \"%s\"\n#define FFI_LIB \"%s\"\n", self::SCOPE, addcslashes($path, "\"\\"))
            . (string) file_get_contents(self::headerFile());
    }

    private static function load(): FFI
    {
        self::requireExtension();
        try {
            $ffi = FFI::scope(self::SCOPE);
            self::$path = 'preloaded';
            return self::$ffi = $ffi;
        } catch (FFI\Exception) {
            // not preloaded: load it now, when FFI allows that here
        }
        $enable = strtolower((string) ini_get('ffi.enable'));
        if (!in_array($enable, ['1', 'on', 'true', 'yes'], true)
            && !($enable === 'preload' && PHP_SAPI === 'cli')) {
            throw new FfiUnavailable(sprintf(
                'ffi.enable=%s: PHP refuses FFI::cdef() here (%s).  Keep ffi.enable=preload '
                . 'and preload the library (php %s > libreserve-ffi.h, then ffi.preload=<that file> '
                . 'in php.ini), or set ffi.enable=1 in php.ini',
                $enable === '' ? '0' : $enable,
                PHP_SAPI,
                dirname(__DIR__) . '/bin/libreserve-ffi-preload'
            ));
        }
        $decls = (string) file_get_contents(self::headerFile());
        $tried = [];
        foreach (self::candidates($tried) as [$where, $cand]) {
            try {
                $ffi = FFI::cdef($decls, $cand);
            } catch (FFI\Exception $e) {
                $tried[] = "$where: $cand (" . $e->getMessage() . ')';
                continue;
            }
            self::$path = $cand;
            return self::$ffi = $ffi;
        }
        throw new LibraryNotFound(self::notFound($tried));
    }

    private static function requireExtension(): void
    {
        if (!extension_loaded('ffi')) {
            throw new FfiUnavailable(
                'the FFI extension is not loaded in this PHP (' . PHP_SAPI . ', ' . PHP_VERSION
                . '): Debian\'s php8.2-cli and php8.2-fpm have it; elsewhere build PHP with '
                . '--with-ffi and set extension=ffi and ffi.enable=1 (or preload)'
            );
        }
    }

    /**
     * The files to try, in order, each with where it came from; reasons
     * for places passed over are appended to $tried.  The wording is the
     * other bindings' (one message in every language).
     *
     * @param list<string> $tried
     * @return list<array{string, string}>
     */
    private static function candidates(array &$tried): array
    {
        $env = getenv('LIBRESERVE_PATH');
        if (is_string($env) && $env !== '') {
            if (is_dir($env)) {
                foreach (['libreserve.so.0', 'libreserve.so'] as $name) {
                    if (is_file($env . '/' . $name)) {
                        return [['LIBRESERVE_PATH', $env . '/' . $name]];
                    }
                }
                $tried[] = "LIBRESERVE_PATH=$env (no libreserve.so.0 or libreserve.so in that directory)";
            } elseif (is_file($env)) {
                return [['LIBRESERVE_PATH', $env]];
            } else {
                $tried[] = "LIBRESERVE_PATH=$env (no such file or directory)";
            }
            // an explicit setting that is wrong is an error, not a hint
            return [];
        }
        $tried[] = 'LIBRESERVE_PATH (not set)';
        $out = [];
        $libdir = self::pkgConfigLibdir($tried);
        if ($libdir !== null) {
            $file = $libdir . '/libreserve.so.0';
            if (is_file($file)) {
                $out[] = ["pkg-config's libdir", $file];
            } else {
                $tried[] = "pkg-config's libdir $libdir (no libreserve.so.0 there)";
            }
        }
        $out[] = ['the system loader', 'libreserve.so.0'];
        return $out;
    }

    /** @param list<string> $tried */
    private static function pkgConfigLibdir(array &$tried): ?string
    {
        if (!function_exists('proc_open')) {
            $tried[] = 'pkg-config (not run: proc_open is disabled)';
            return null;
        }
        $proc = @proc_open(['pkg-config', '--variable=libdir', 'reserve'], [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        if (!is_resource($proc)) {
            $tried[] = 'pkg-config (cannot be run)';
            return null;
        }
        $out = trim((string) stream_get_contents($pipes[1]));
        fclose($pipes[1]);
        fclose($pipes[2]);
        $rc = proc_close($proc);
        if ($rc === 127) {
            $tried[] = 'pkg-config (not installed)';
            return null;
        }
        if ($rc !== 0 || $out === '') {
            $tried[] = 'pkg-config --variable=libdir reserve (no reserve.pc in its search path)';
            return null;
        }
        return $out;
    }

    /** @param list<string> $tried */
    private static function notFound(array $tried): string
    {
        return 'libreserve: cannot load the C library libreserve.so.0; tried ' . implode('; ', $tried)
            . '.  Install it (make install), or set LIBRESERVE_PATH to the library or its directory,'
            . ' or PKG_CONFIG_PATH to the directory of reserve.pc';
    }
}
