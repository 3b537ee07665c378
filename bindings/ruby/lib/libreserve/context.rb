# frozen_string_literal: true

module Libreserve
  # Allocation: where units of a cart line are held.
  Allocation = Struct.new(:location_id, :quantity, keyword_init: true)
  # Stock: the stock of one item at one location, from one snapshot.
  Stock = Struct.new(:on_hand, :held, :pooled, :available, keyword_init: true)
  # CheckoutStatus: status is :held, :claimed, :released or :expired.
  CheckoutStatus = Struct.new(:status, :units, :expires_in_ms, keyword_init: true)
  # Violation: a broken invariant found by Context#audit.
  Violation = Struct.new(:shop_id, :item_id, :location_id, :problem, keyword_init: true)

  STATUSES = { 1 => :held, 2 => :claimed, 3 => :released, 4 => :expired }.freeze
  OPS = %i[all reserve claim release extend status replenish sweep stock audit].freeze
  STATS = %i[calls ok expected failed retries deadlocks lock_wait_timeouts
             inline_refills slow_paths short_reads statements latency_us
             latency_max_us one_trip back_to_fast ledger_takes pool_drained
             stmt_evictions].freeze

  # Context is one libreserve context and the MariaDB connection it owns
  # (rsv_open_dsn).  Calls from several threads on one context take turns;
  # for concurrency open one per thread, or share a Batcher.  While a call
  # waits for the server the GVL is released: the process's other threads
  # run.  A context belongs to the process that opened it: after a fork
  # the child's calls raise IOError, and the child closing it (or its
  # garbage collector) leaves the parent's connection alone.
  class Context
    # Context.open(dsn, **options) { |ctx| ... } closes the context when
    # the block ends and returns the block's value; without a block it
    # returns the context.
    def self.open(dsn, **options)
      ctx = new(dsn, **options)
      return ctx unless block_given?

      begin
        yield ctx
      ensure
        ctx.close
      end
    end

    # dsn: mariadb://[USER[:PASSWORD]@][HOST][:PORT]/DATABASE[?KEY=VALUE&...]
    # (see Libreserve.dsn); options: the fields of struct rsv_options
    # (pool_cap:, hold_ttl_ms:, call_timeout_ms:, ...; see reserve.h).
    def initialize(dsn, **options)
      Args.string(dsn, "dsn")
      opts, _keep = Libreserve.native_options(options)
      out = FFI::MemoryPointer.new(:pointer)
      rc = Native.rsv_open_dsn(out, dsn, opts)
      ptr = out.read_pointer
      unless rc.zero?
        detail = ptr.null? ? nil : Native.rsv_errmsg(ptr)
        Native.rsv_close(ptr) unless ptr.null?
        raise Libreserve.error_for(rc, detail)
      end
      @pid = Process.pid
      @ptr = FFI::AutoPointer.new(ptr, Libreserve.closer(@pid) { |p| Native.rsv_close(p) })
      @lock = Mutex.new
    end

    # Closes the context and its connection.  Closing twice is harmless.
    def close
      @lock.synchronize do
        @ptr&.free
        @ptr = nil
      end
    end

    def closed?
      @ptr.nil?
    end

    # Opens the connection again (after ConnectionError or InDoubt; then
    # repeat the call: every call is idempotent for the same token).
    def reconnect
      call { |p| Native.rsv_reconnect(p) }
      self
    end

    # Holds quantity units of item_id at location_id for the checkout token
    # of shop_id, for ttl_ms (0: the context's default).
    def reserve_one(shop_id, token, item_id:, location_id:, quantity:, ttl_ms: 0)
      args = Libreserve.reserve_one_args(shop_id, token, item_id, location_id, quantity, ttl_ms)
      begin
        call { |p| Native.rsv_reserve_one(p, *args) }
      rescue Libreserve::Error => e
        raise Libreserve.one_line(e)
      end
      true
    end

    # Holds every line, all or nothing.  lines: Hashes with item_id:,
    # locations: (preferred first), quantity: and optionally split: true
    # (the line may be served by several of its locations).  Returns, per
    # line, the Allocations that hold it.  OutOfStock#failed_line names
    # the line that could not be covered.
    def reserve(shop_id, token, lines, ttl_ms: 0)
      Libreserve.reserve_lines(shop_id, token, lines, ttl_ms) do |shop, tok, cart, ttl|
        call { |p| Native.rsv_reserve(p, shop, *tok, cart, ttl) }
      end
    end

    # Payment succeeded: the checkout's units leave the stock for good.  A
    # repeated claim raises AlreadyClaimed and takes nothing.
    def claim(shop_id, token)
      args = Libreserve.checkout_args(shop_id, token)
      call { |p| Native.rsv_claim(p, *args) }
      true
    end

    # Payment failed or the buyer left: the units go back.  Releasing a
    # released or expired checkout is not an error.
    def release(shop_id, token)
      args = Libreserve.checkout_args(shop_id, token)
      call { |p| Native.rsv_release(p, *args) }
      true
    end

    # Pushes the checkout's deadline to now + ttl_ms (0: the default).
    # (Not `extend`, which every Ruby object has.)
    def extend_hold(shop_id, token, ttl_ms: 0)
      args = Libreserve.checkout_args(shop_id, token) << Args.ttl(ttl_ms)
      call { |p| Native.rsv_extend(p, *args) }
      true
    end

    # The checkout's state, read without locking.
    def status(shop_id, token)
      args = Libreserve.checkout_args(shop_id, token)
      st = FFI::MemoryPointer.new(:int32)
      units = FFI::MemoryPointer.new(:int64)
      expires = FFI::MemoryPointer.new(:int64)
      call { |p| Native.rsv_checkout_status(p, *args, st, units, expires) }
      CheckoutStatus.new(status: STATUSES.fetch(st.read_int32), units: units.read_int64,
                         expires_in_ms: expires.read_int64)
    end

    # Sets the stock on hand, creating the ledger row if needed.
    def stock_set(shop_id, item_id:, location_id:, on_hand:)
      args = key_args(shop_id, item_id, location_id) << Args.int64(on_hand, "on_hand")
      call { |p| Native.rsv_stock_set(p, *args) }
      true
    end

    # Adds delta to the stock on hand; returns the new figure.  Not
    # idempotent: after InDoubt read #stock before repeating it.
    def stock_adjust(shop_id, item_id:, location_id:, delta:)
      args = key_args(shop_id, item_id, location_id) << Args.int64(delta, "delta")
      out = FFI::MemoryPointer.new(:int64)
      call { |p| Native.rsv_stock_adjust(p, *args, out) }
      out.read_int64
    end

    def stock(shop_id, item_id:, location_id:)
      args = key_args(shop_id, item_id, location_id)
      outs = Array.new(4) { FFI::MemoryPointer.new(:int64) }
      call { |p| Native.rsv_stock_get(p, *args, *outs) }
      on_hand, held, pooled, available = outs.map(&:read_int64)
      Stock.new(on_hand: on_hand, held: held, pooled: pooled, available: available)
    end

    # Tops the pool up from the ledger; returns the rows added.
    def replenish(shop_id, item_id:, location_id:)
      int_out { |out| key_args(shop_id, item_id, location_id).then { |a| call { |p| Native.rsv_replenish(p, *a, out) } } }
    end

    # Gives the pool back to its ledger row; returns the rows given back.
    def pool_drain(shop_id, item_id:, location_id:)
      int_out { |out| key_args(shop_id, item_id, location_id).then { |a| call { |p| Native.rsv_pool_drain(p, *a, out) } } }
    end

    # Gives back expired holds (up to max_holds, 0: 10000), drains idle
    # pools, purges old settled checkouts; returns the holds given back.
    def sweep(shop_id, max_holds: 0)
      args = [Args.id(shop_id, "shop_id"), Args.int64(max_holds, "max_holds")]
      int_out { |out| call { |p| Native.rsv_sweep(p, *args, out) } }
    end

    # Checks the invariants for one shop (or every shop); returns the
    # Violations found, none in a healthy database.
    def audit(shop_id = 0, all_shops: false)
      args = [Args.id(shop_id, "shop_id"), Args.bool(all_shops, "all_shops") ? 1 : 0]
      found = []
      collect = proc { |_arg, shop, item, loc, problem|
        found << Violation.new(shop_id: shop, item_id: item, location_id: loc, problem: problem)
      }
      call { |p| Native.rsv_audit(p, *args, collect, nil, nil) }
      found
    end

    # Many one-line checkouts at once (at most 256): entries are Hashes
    # with shop_id:, token:, item_id:, location_id:, quantity:.  Returns,
    # per entry, nil (held) or the exception reserve_one would have raised.
    def reserve_batch(entries, ttl_ms: 0)
      ttl = Args.ttl(ttl_ms)
      rows = Libreserve.batch_rows(entries, %i[shop_id token item_id location_id quantity])
      shops, tokens, items, locs, qtys = rows.transpose
      batch(tokens) do |p, n, tok_ptrs, tok_lens, res|
        Native.rsv_reserve_batch(p, n, u64s(shops), tok_ptrs, tok_lens, u64s(items), u64s(locs),
                                 FFI::MemoryPointer.new(:int64, n).write_array_of_int64(qtys), ttl, res)
      end
    end

    # Many checkouts of carts at once (at most 256): entries are Hashes
    # with shop_id:, token: and lines: (as for reserve).  Returns, per
    # entry, its allocations (as reserve returns them) or the exception
    # reserve would have raised (OutOfStock and NoItem with failed_line).
    def reserve_cart_batch(entries, ttl_ms: 0)
      ttl = Args.ttl(ttl_ms)
      lines = entries.is_a?(Array) ? entries.map { |e| e.is_a?(Hash) ? e[:lines] : nil } : nil
      plain = entries.is_a?(Array) ? entries.map { |e| e.is_a?(Hash) ? e.reject { |k, _| k == :lines } : e } : entries
      shops, tokens = Libreserve.batch_rows(plain, %i[shop_id token]).transpose
      lines.each_with_index do |l, i|
        raise TypeError, "batch entry #{i}: lines must be an Array of Hashes, not #{l.class}" unless l.is_a?(Array)
      end
      carts = []
      begin
        lines.each { |l| carts << Libreserve.new_cart(l) }
        cart_ptrs = FFI::MemoryPointer.new(:pointer, carts.size).write_array_of_pointer(carts)
        errors = batch(tokens) do |p, n, tp, tl, res|
          Native.rsv_reserve_cart_batch(p, n, u64s(shops), tp, tl, cart_ptrs, ttl, res)
        end
        errors.each_with_index.map do |e, i|
          next Libreserve.allocations(carts[i], lines[i].size) if e.nil?

          Libreserve.note_failed_line(e, carts[i], lines[i].size)
        end
      ensure
        carts.each { |c| Native.rsv_cart_free(c) }
      end
    end

    # Claims many checkouts at once: checkouts are Hashes with shop_id:
    # and token:.  Returns, per entry, nil or the exception claim would
    # have raised.
    def claim_batch(checkouts)
      shops, tokens = Libreserve.batch_rows(checkouts, %i[shop_id token]).transpose
      batch(tokens) { |p, n, tp, tl, res| Native.rsv_claim_batch(p, n, u64s(shops), tp, tl, res) }
    end

    # As claim_batch, for releases.
    def release_batch(checkouts)
      shops, tokens = Libreserve.batch_rows(checkouts, %i[shop_id token]).transpose
      batch(tokens) { |p, n, tp, tl, res| Native.rsv_release_batch(p, n, u64s(shops), tp, tl, res) }
    end

    # The counters of the calls made on this context, for op (:all,
    # :reserve, :claim, ...), as a Hash (:calls, :ok, :retries, ...).
    def stats(op = :all)
      opi = OPS.index(op) or raise ArgumentError, "op must be one of #{OPS.join(', ')}, not #{op.inspect}"
      out = FFI::MemoryPointer.new(:uint64)
      @lock.synchronize do
        STATS.each_with_index.to_h do |name, i|
          check_open
          Native.rsv_stats_get(@ptr, i, opi, out)
          [name, out.read_uint64]
        end
      end
    end

    # Switches the context off (every call that writes raises Disabled and
    # sends nothing) or on again.
    def enabled=(on)
      flag = Args.bool(on, "enabled") ? 1 : 0
      call { |p| Native.rsv_set_enabled(p, flag) }
    end

    # Yields the native context under the context's lock and returns the
    # block's value: a Migration uses the context inside its calls.  Not
    # part of the API.
    def native_call
      @lock.synchronize do
        check_open
        yield @ptr
      end
    end

    private

    def check_open
      raise IOError, "the libreserve context is closed" if @ptr.nil?

      Libreserve.check_pid(@pid, "context")
    end

    # Runs one library call on the context; raises for its code.
    def call
      @lock.synchronize do
        check_open
        rc = yield @ptr
        raise Libreserve.error_for(rc, Native.rsv_errmsg(@ptr)) if rc.negative?

        rc
      end
    end

    def key_args(shop_id, item_id, location_id)
      [Args.id(shop_id, "shop_id"), Args.id(item_id, "item_id"), Args.id(location_id, "location_id")]
    end

    def int_out
      out = FFI::MemoryPointer.new(:int64)
      yield out
      out.read_int64
    end

    def u64s(values)
      FFI::MemoryPointer.new(:uint64, values.size).write_array_of_uint64(values)
    end

    def batch(tokens)
      n = tokens.size
      ptrs = tokens.map { |t| FFI::MemoryPointer.new(:char, t.bytesize).put_bytes(0, t) }
      tok_ptrs = FFI::MemoryPointer.new(:pointer, n).write_array_of_pointer(ptrs)
      tok_lens = FFI::MemoryPointer.new(:size_t, n).write_array_of_type(:size_t, :put_ulong, tokens.map(&:bytesize))
      res = FFI::MemoryPointer.new(:int, n)
      call { |p| yield p, n, tok_ptrs, tok_lens, res }
      res.read_array_of_int(n).map { |rc| rc.zero? ? nil : Libreserve.error_for(rc) }
    end
  end
end
