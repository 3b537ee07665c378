<?php
/*
 * LibraryTest.php - how the package finds libreserve.so (LIBRESERVE_PATH,
 * then pkg-config's libdir, then the system loader) and what it says when
 * the library or FFI is missing; each case in a PHP process of its own,
 * since a process loads the library once.
 */

declare(strict_types=1);

namespace Libreserve\Tests;

use PHPUnit\Framework\TestCase;

final class LibraryTest extends TestCase
{
    private const PROBE = <<<'PHP'
        spl_autoload_register(function ($c) {
            $f = getenv('RSV_PHP_SRC') . '/' . str_replace('\\', '/', substr($c, strlen('Libreserve\\'))) . '.php';
            if (is_file($f)) { require $f; }
        });
        try {
            $p = Libreserve\Library::path();
            echo "loaded ", $p, " ", Libreserve\Library::ffi()->rsv_version();
        } catch (Throwable $e) {
            echo get_class($e), ": ", $e->getMessage();
        }
        PHP;

    /**
     * @param array<string, string|false> $env  false: unset
     * @param list<string> $ini
     */
    private static function probe(array $env, array $ini = []): string
    {
        $e = getenv();
        $e['RSV_PHP_SRC'] = dirname(__DIR__) . '/src';
        foreach ($env as $k => $v) {
            if ($v === false) {
                unset($e[$k]);
            } else {
                $e[$k] = $v;
            }
        }
        $cmd = [PHP_BINARY, '-n'];
        foreach (array_merge(['extension=ffi'], $ini) as $setting) {
            $cmd[] = '-d';
            $cmd[] = $setting;
        }
        if (!extension_loaded('ffi') || ini_get('extension_dir') === false) {
            return 'no ffi';
        }
        array_splice($cmd, 2, 0, ['-d', 'extension_dir=' . ini_get('extension_dir')]);
        $cmd[] = '-r';
        $cmd[] = self::PROBE;
        $p = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $e);
        $out = (string) stream_get_contents($pipes[1]) . (string) stream_get_contents($pipes[2]);
        proc_close($p);
        return $out;
    }

    private static function library(): string
    {
        return (string) realpath((string) getenv('LIBRESERVE_PATH'));
    }

    public function testLibreservePathFileOrDirectory(): void
    {
        $lib = self::library();
        $this->assertStringStartsWith("loaded $lib 0.1.0", self::probe(['LIBRESERVE_PATH' => $lib]));
        $dir = sys_get_temp_dir() . '/rsv-php-lib-' . getmypid();
        @mkdir($dir);
        symlink($lib, "$dir/libreserve.so.0");
        try {
            $this->assertStringStartsWith("loaded $dir/libreserve.so.0 ", self::probe(['LIBRESERVE_PATH' => $dir]));
        } finally {
            unlink("$dir/libreserve.so.0");
            rmdir($dir);
        }
    }

    public function testPkgConfigLibdirThenTheLoader(): void
    {
        $lib = self::library();
        $pc = sys_get_temp_dir() . '/rsv-php-pc-' . getmypid();
        @mkdir("$pc/lib", 0777, true);
        symlink($lib, "$pc/lib/libreserve.so.0");
        file_put_contents("$pc/reserve.pc", "libdir=$pc/lib\nName: reserve\nDescription: test\nVersion: 0.1.0\nLibs: -L\${libdir} -lreserve\n");
        try {
            $out = self::probe(['LIBRESERVE_PATH' => false, 'PKG_CONFIG_PATH' => $pc, 'PKG_CONFIG_LIBDIR' => $pc]);
            $this->assertStringStartsWith("loaded $pc/lib/libreserve.so.0 ", $out);
            // nothing anywhere: every place tried is named
            $out = self::probe(['LIBRESERVE_PATH' => false, 'PKG_CONFIG_PATH' => "$pc/none", 'PKG_CONFIG_LIBDIR' => "$pc/none", 'LD_LIBRARY_PATH' => "$pc/none"]);
            if (str_starts_with($out, 'loaded libreserve.so.0')) {
                $this->markTestSkipped('libreserve is installed system-wide: the loader finds it');
            }
            $this->assertStringStartsWith('Libreserve\Exception\LibraryNotFound: ', $out);
            $this->assertStringContainsString('cannot load the C library libreserve.so.0; tried LIBRESERVE_PATH (not set); '
                . 'pkg-config --variable=libdir reserve (no reserve.pc in its search path); the system loader: libreserve.so.0 (', $out);
        } finally {
            unlink("$pc/lib/libreserve.so.0");
            unlink("$pc/reserve.pc");
            rmdir("$pc/lib");
            rmdir($pc);
        }
    }

    public function testAWrongSettingIsNamed(): void
    {
        $out = self::probe(['LIBRESERVE_PATH' => '/nonexistent/libreserve.so.0']);
        $this->assertStringStartsWith('Libreserve\Exception\LibraryNotFound: ', $out);
        $this->assertStringContainsString('LIBRESERVE_PATH=/nonexistent/libreserve.so.0 (no such file', $out);
    }

    public function testFfiSwitchedOffNamesTheSetting(): void
    {
        $out = self::probe([], ['ffi.enable=0']);
        $this->assertStringStartsWith('Libreserve\Exception\FfiUnavailable: ffi.enable=0', $out);
        $this->assertStringContainsString('ffi.enable=1', $out);
        $this->assertStringContainsString('ffi.preload=', $out);
        $out = self::probe([], ['ffi.enable=1']);
        $this->assertStringStartsWith('loaded ', $out);
    }
}
