<?php
/*
 * autoload.php - the package's classes without Composer: require this file
 * (Composer's vendor/autoload.php does the same from composer.json).
 */

declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'Libreserve\\')) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, 11)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
