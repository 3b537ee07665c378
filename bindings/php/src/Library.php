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
 * A library preloaded with {@see Library::preload()} (opcache.preload,
 * for PHP-FPM) is used before any of them.
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
     * For opcache.preload under PHP-FPM: finds the library as above and
     * registers its declarations under the FFI scope "LIBRESERVE", so that
     * every request of every worker uses it with ffi.enable=preload (PHP's
     * default) and without parsing the declarations again.  Call it from
     * the preload script (see preload.php).  Returns the library's path.
     */
    public static function preload(): string
    {
        self::requireExtension();
        $tried = [];
        foreach (self::candidates($tried) as $cand) {
            // FFI::load takes the library from a define in the header
            // file itself, so a copy naming the library found is written
            // and loaded; FFI keeps what it parsed, the copy can go.
            $tmp = tempnam(sys_get_temp_dir(), 'libreserve-ffi-');
            if ($tmp === false) {
                throw new LibraryNotFound('cannot write the preload header to ' . sys_get_temp_dir());
            }
            file_put_contents($tmp, sprintf("#define FFI_SCOPE \"%s\"\n#define FFI_LIB \"%s\"\n", self::SCOPE, addcslashes($cand, "\"\\"))
                . (string) file_get_contents(self::headerFile()));
            try {
                $ffi = FFI::load($tmp);
            } catch (FFI\Exception $e) {
                $tried[] = $cand . ': ' . $e->getMessage();
                continue;
            } finally {
                @unlink($tmp);
            }
            if ($ffi !== null) {
                self::$ffi = $ffi;
                self::$path = $cand;
                return $cand;
            }
            $tried[] = $cand . ': FFI::load failed';
        }
        throw new LibraryNotFound(self::notFound($tried));
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
                'ffi.enable=%s: PHP refuses FFI::cdef() here (%s).  Set ffi.enable=1 '
                . '(php.ini, or php_admin_value[ffi.enable] = 1 in the FPM pool), or keep '
                . 'ffi.enable=preload and preload the library: opcache.preload=%s',
                $enable === '' ? '0' : $enable,
                PHP_SAPI,
                dirname(__DIR__) . '/preload.php'
            ));
        }
        $decls = (string) file_get_contents(self::headerFile());
        $tried = [];
        foreach (self::candidates($tried) as $cand) {
            try {
                $ffi = FFI::cdef($decls, $cand);
            } catch (FFI\Exception $e) {
                $tried[] = $cand . ': ' . $e->getMessage();
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
     * The files to try, in order; reasons for places passed over are
     * appended to $tried.
     *
     * @param list<string> $tried
     * @return list<string>
     */
    private static function candidates(array &$tried): array
    {
        $env = getenv('LIBRESERVE_PATH');
        if (is_string($env) && $env !== '') {
            if (is_dir($env)) {
                foreach (['libreserve.so.0', 'libreserve.so'] as $name) {
                    if (is_file($env . '/' . $name)) {
                        return [$env . '/' . $name];
                    }
                }
                $tried[] = "LIBRESERVE_PATH=$env: no libreserve.so.0 or libreserve.so in that directory";
            } elseif (is_file($env)) {
                return [$env];
            } else {
                $tried[] = "LIBRESERVE_PATH=$env: no such file or directory";
            }
            // an explicit setting that is wrong is an error, not a hint
            return [];
        }
        $tried[] = 'LIBRESERVE_PATH: not set';
        $out = [];
        $libdir = self::pkgConfigLibdir($tried);
        if ($libdir !== null) {
            $file = $libdir . '/libreserve.so.0';
            if (is_file($file)) {
                $out[] = $file;
            } else {
                $tried[] = "pkg-config --variable=libdir reserve: $file does not exist";
            }
        }
        $out[] = 'libreserve.so.0';
        return $out;
    }

    /** @param list<string> $tried */
    private static function pkgConfigLibdir(array &$tried): ?string
    {
        if (!function_exists('proc_open')) {
            $tried[] = 'pkg-config: not run (proc_open is disabled)';
            return null;
        }
        $proc = @proc_open(['pkg-config', '--variable=libdir', 'reserve'], [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        if (!is_resource($proc)) {
            $tried[] = 'pkg-config: cannot be run';
            return null;
        }
        $out = trim((string) stream_get_contents($pipes[1]));
        $err = trim((string) stream_get_contents($pipes[2]));
        fclose($pipes[1]);
        fclose($pipes[2]);
        $rc = proc_close($proc);
        if ($rc !== 0 || $out === '') {
            $tried[] = 'pkg-config --variable=libdir reserve: '
                . ($rc === 127 ? 'pkg-config is not installed' : ($err !== '' ? $err : "exit status $rc"));
            return null;
        }
        return $out;
    }

    /** @param list<string> $tried */
    private static function notFound(array $tried): string
    {
        return "libreserve.so not found or not loadable; tried:\n  - " . implode("\n  - ", $tried)
            . "\nInstall the library (make install; libreserve0 package) or set LIBRESERVE_PATH"
            . ' to the library file or its directory.';
    }
}
