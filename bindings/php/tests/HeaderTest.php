<?php
/*
 * HeaderTest.php - the FFI declarations (src/libreserve.h) against the C
 * headers: every function, struct and callback type declared for FFI must
 * read exactly as in include/reserve.h and its sub-headers, so that they
 * cannot drift apart silently.
 */

declare(strict_types=1);

namespace Libreserve\Tests;

use Libreserve\Library;
use PHPUnit\Framework\TestCase;

final class HeaderTest extends TestCase
{
    /** C text without comments and preprocessor lines, spacing made canonical. */
    public static function normalize(string $c): string
    {
        $c = (string) preg_replace('#/\*.*?\*/#s', ' ', $c);
        $c = (string) preg_replace('#//[^\n]*#', ' ', $c);
        $c = (string) preg_replace('/^\s*#.*$/m', ' ', $c);
        $c = str_replace('RSV_EXTERN', ' ', $c);
        $c = (string) preg_replace('/\s+/', ' ', $c);
        $c = (string) preg_replace('/\s*([*(),;{}\[\]])\s*/', '$1', $c);
        return trim($c);
    }

    /**
     * Declarations by name: functions (name => prototype), typedef'd
     * structs and function types (name => definition).
     *
     * @return array<string, string>
     */
    public static function declarations(string $c): array
    {
        $text = self::normalize($c);
        $out = [];
        // struct typedefs with a body
        if (preg_match_all('/typedef struct (\w+)\{([^}]*)\}(\w+);/', $text, $m, PREG_SET_ORDER)) {
            foreach ($m as $d) {
                $out['struct ' . $d[3]] = $d[0];
            }
        }
        // function pointer typedefs
        if (preg_match_all('/typedef [\w ]+\(\*(\w+)\)\([^;]*\);/', $text, $m, PREG_SET_ORDER)) {
            foreach ($m as $d) {
                $out['type ' . $d[1]] = $d[0];
            }
        }
        // prototypes: statements that end in ");" and name a function
        foreach (explode(';', $text) as $stmt) {
            $stmt = trim((string) preg_replace('/^.*[{}]/', '', $stmt));
            if (str_starts_with($stmt, 'typedef') || !preg_match('/^[\w *]*?\**(\w+)\((.*)\)$/s', $stmt, $m)) {
                continue;
            }
            $out['fn ' . $m[1]] = $stmt . ';';
        }
        return $out;
    }

    /** @return list<string> */
    public static function cHeaders(): array
    {
        $inc = getenv('RSV_INCLUDE_DIR') ?: dirname(__DIR__, 3) . '/include';
        return array_merge([$inc . '/reserve.h'], glob($inc . '/reserve/*.h') ?: []);
    }

    public function testEveryDeclarationMatchesTheCHeaders(): void
    {
        $c = [];
        foreach (self::cHeaders() as $file) {
            $this->assertFileExists($file);
            $c += self::declarations((string) file_get_contents($file));
        }
        $this->assertArrayHasKey('fn rsv_reserve', $c, 'the C headers were parsed');
        $ffi = self::declarations((string) file_get_contents(Library::headerFile()));
        $checked = 0;
        foreach ($ffi as $name => $decl) {
            if (in_array($name, ['fn getenv', 'fn setenv', 'fn unsetenv'], true)) {
                continue; // the C library's, not ours
            }
            $this->assertArrayHasKey($name, $c, "$name is declared for FFI but not in the C headers");
            $this->assertSame($c[$name], $decl, "$name differs from the C header");
            $checked++;
        }
        $this->assertGreaterThanOrEqual(45, $checked);
    }

    public function testTheCheckSeesADifference(): void
    {
        $c = self::declarations('RSV_EXTERN int rsv_claim(rsv_ctx *ctx, uint64_t shop_id, const void *token, size_t token_len);');
        $same = self::declarations("int rsv_claim(rsv_ctx *ctx, uint64_t shop_id,\n  const void *token, size_t token_len);");
        $this->assertSame($c, $same);
        $drifted = self::declarations('int rsv_claim(rsv_ctx *ctx, uint32_t shop_id, const void *token, size_t token_len);');
        $this->assertNotSame($c['fn rsv_claim'], $drifted['fn rsv_claim']);
    }

    public function testOptionsLayoutMatchesTheLibrary(): void
    {
        $ffi = Library::ffi();
        $this->assertSame($ffi->rsv_options_size(), \FFI::sizeof($ffi->type('rsv_options')));
        $this->assertSame(Library::HEADER_VERSION_NUMBER, $ffi->rsv_version_number());
    }
}
