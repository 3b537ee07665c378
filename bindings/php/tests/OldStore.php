<?php
/*
 * OldStore.php - the tests' stand-in for a shop's old store, kept in PHP
 * arrays as a Redis design keeps counters and holds: units of one item,
 * holds by token; it can be told to refuse one reserve it could have
 * made, or to fail.
 */

declare(strict_types=1);

namespace Libreserve\Tests;

use Libreserve\Code;
use Libreserve\Op;

final class OldStore
{
    /** @var array<string, array{int, string}> token => [quantity, 'held'|'claimed'|'released'] */
    public array $holds = [];
    /** @var list<array{string, string}> [op, token] of every call */
    public array $calls = [];
    /** Refuse the next reserve as out of stock, whatever the stock. */
    public bool $refuseNext = false;
    /** What the next call does instead of answering: throw it, or return it. */
    public mixed $failNext = null;

    public function __construct(public int $stock)
    {
    }

    public function __invoke(Op $op, int $shopId, string $token, int $itemId, int $locationId, int $quantity, int $ttlMs): mixed
    {
        $this->calls[] = [$op->name, $token];
        if ($this->failNext !== null) {
            $f = $this->failNext;
            $this->failNext = null;
            if ($f instanceof \Throwable) {
                throw $f;
            }
            return $f;
        }
        $hold = $this->holds[$token] ?? null;
        if ($op === Op::Reserve) {
            if ($hold !== null) {
                return Code::Ok;
            }
            if ($this->refuseNext || $this->stock < $quantity) {
                $this->refuseNext = false;
                return Code::OutOfStock;
            }
            $this->stock -= $quantity;
            $this->holds[$token] = [$quantity, 'held'];
            return Code::Ok;
        }
        if ([$itemId, $locationId, $quantity, $ttlMs] !== [0, 0, 0, 0]) {
            throw new \LogicException("a claim or release with a reserve's arguments");
        }
        if ($hold === null) {
            return Code::NotFound;
        }
        if ($hold[1] === 'claimed') {
            return Code::Claimed;
        }
        if ($op === Op::Claim) {
            if ($hold[1] === 'released') {
                return Code::Released;
            }
            $this->holds[$token][1] = 'claimed';
        } elseif ($hold[1] === 'held') {
            $this->holds[$token][1] = 'released';
            $this->stock += $hold[0];
        }
        return Code::Ok;
    }

    public function state(string $token): ?string
    {
        return $this->holds[$token][1] ?? null;
    }
}
