# frozen_string_literal: true

module Libreserve
  # Batcher coalesces the reserves, claims and releases of many threads
  # onto a few connections of its own, as batches (one statement and one
  # commit for many checkouts): one per process, shared by every thread
  # (a Puma worker's, a Sidekiq process's).  Each call answers what the
  # single call on a Context would; the exceptions carry no per-call
  # detail beyond the code's text.
  #
  # Open it after the process forks (Puma's on_worker_boot): its
  # connections and threads do not survive a fork.
  class Batcher
    include InsideCount

    # Batcher.open(dsn, connections: 4, **options) { |b| ... } closes it
    # when the block ends.
    def self.open(dsn, connections: 4, **options)
      b = new(dsn, connections: connections, **options)
      return b unless block_given?

      begin
        yield b
      ensure
        b.close
      end
    end

    def initialize(dsn, connections: 4, **options)
      Args.string(dsn, "dsn")
      Args.integer(connections, "connections")
      unless connections.between?(1, 64)
        raise InvalidArgument.new(-10, "connections must be 1..64, not #{connections}")
      end

      opts, _keep = Libreserve.native_options(options)
      out = FFI::MemoryPointer.new(:pointer)
      rc = Native.rsv_batcher_open(out, dsn, opts, connections)
      unless rc.zero?
        raise Libreserve.error_for(rc, "#{Native.rsv_strerror(rc)} (the batcher keeps no message: " \
                                       "open a Context with the same dsn to see why)")
      end

      @ptr = out.read_pointer
      @pid = Process.pid
      @lock = Mutex.new
      @idle = ConditionVariable.new
      @inside = 0
    end

    def reserve_one(shop_id, token, item_id:, location_id:, quantity:, ttl_ms: 0)
      args = Libreserve.reserve_one_args(shop_id, token, item_id, location_id, quantity, ttl_ms)
      call { |p| Native.rsv_batcher_reserve_one(p, *args) }
    rescue Libreserve::Error => e
      raise Libreserve.one_line(e)
    end

    # A cart (lines as for Context#reserve) through the batcher, coalesced
    # with the other threads' carts; returns the allocations as
    # Context#reserve does.
    def reserve(shop_id, token, lines, ttl_ms: 0)
      Libreserve.reserve_lines(shop_id, token, lines, ttl_ms) do |shop, tok, cart, ttl|
        call { |p| Native.rsv_batcher_reserve(p, shop, *tok, cart, ttl) }
      end
    end

    def claim(shop_id, token)
      args = Libreserve.checkout_args(shop_id, token)
      call { |p| Native.rsv_batcher_claim(p, *args) }
    end

    def release(shop_id, token)
      args = Libreserve.checkout_args(shop_id, token)
      call { |p| Native.rsv_batcher_release(p, *args) }
    end

    # The counters summed over the batcher's connections (each batch
    # entry counts as one call), as Context#stats.
    def stats(op = :all)
      opi = OPS.index(op) or raise ArgumentError, "op must be one of #{OPS.join(', ')}, not #{op.inspect}"
      out = FFI::MemoryPointer.new(:uint64)
      inside do |p|
        STATS.each_with_index.to_h do |name, i|
          Native.rsv_batcher_stats_get(p, i, opi, out)
          [name, out.read_uint64]
        end
      end
    end

    # The statistics as Prometheus text (format 0.0.4); labels (e.g.
    # 'instance="a"') come first in every series.
    def prometheus(labels = nil)
      labels = Args.string(labels, "labels") unless labels.nil?
      inside do |p|
        out = FFI::MemoryPointer.new(:pointer)
        rc = Native.rsv_stats_snapshot_new(out)
        raise Libreserve.error_for(rc) unless rc.zero?

        snap = out.read_pointer
        begin
          Native.rsv_batcher_stats_snapshot_add(snap, p)
          need = FFI::MemoryPointer.new(:size_t)
          rc = Native.rsv_stats_prometheus(snap, labels, nil, 0, need)
          raise Libreserve.error_for(rc, "labels #{labels.inspect}: #{Native.rsv_strerror(rc)}") if rc != -23 && rc != 0

          buf = FFI::MemoryPointer.new(:char, need.read(:size_t))
          rc = Native.rsv_stats_prometheus(snap, labels, buf, buf.size, need)
          raise Libreserve.error_for(rc) unless rc.zero?

          buf.read_string
        ensure
          Native.rsv_stats_snapshot_free(snap)
        end
      end
    end

    # Lets the calls in progress finish, then stops the batcher and closes
    # its connections.  Calls made afterwards raise IOError.
    def close
      @lock.synchronize do
        return if @ptr.nil?

        ptr = @ptr
        @ptr = nil
        # (a forked child has none of the workers close would wait for)
        return if Process.pid != @pid

        @idle.wait(@lock) while @inside.positive?
        Native.rsv_batcher_close(ptr)
      end
      nil
    end

    def closed?
      @ptr.nil?
    end

    private

    def inside_what
      "batcher"
    end

    def call
      rc = inside { |p| yield p }
      raise Libreserve.error_for(rc) if rc.negative?

      true
    end
  end
end
