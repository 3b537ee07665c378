# frozen_string_literal: true

module Libreserve
  # The migration handle's C functions (reserve/migrate.h), attached apart:
  # a library older than the handle still loads, and only
  # Migration.new says what it lacks.
  module Native
    callback :legacy_fn, %i[pointer uint32 uint64 pointer size_t uint64 uint64 int64 int64], :int

    begin
      attach_function :rsv_migrate_set_legacy, %i[pointer legacy_fn pointer], :int
      attach_function :rsv_migrate_set_refresh_ms, %i[pointer uint32], :int
      attach_function :rsv_migrate_stage, %i[pointer uint64 pointer], :int
      attach_function :rsv_migrate_stat, %i[pointer uint64 int32 uint32 pointer], :int
      attach_function :rsv_migrate_prometheus, %i[pointer pointer size_t pointer], :int
      attach_function :rsv_migrate_class_name, [:uint32], :string
      # These wait: for the server, or for the handle's thread, whose calls
      # of the old store need the GVL.
      {
        rsv_migrate_open: %i[pointer pointer string uint32],
        rsv_migrate_reserve_one: %i[pointer uint64 pointer size_t uint64 uint64 int64 int64],
        rsv_migrate_claim: %i[pointer uint64 pointer size_t],
        rsv_migrate_release: %i[pointer uint64 pointer size_t],
        rsv_migrate_drain: %i[pointer uint32]
      }.each { |name, args| attach_function name, args, :int, blocking: true }
      attach_function :rsv_migrate_close, [:pointer], :void, blocking: true
      MIGRATE_MISSING = nil
    rescue FFI::NotFoundError => e
      MIGRATE_MISSING = e.message
    end
  end

  # Migration moves a live shop from the store it sold through before (the
  # "old store": Redis counters, a counter row ...) to libreserve, stage by
  # stage (docs/migration.md; the C library's reserve/migrate.h).  The
  # shop's stage, set with `rsv-admin migrate`, decides which store answers
  # the buyer: the old store (:old, :shadow) or libreserve (:primary,
  # :complete); the other store's side runs on the handle's own thread and
  # connection.
  #
  #   Libreserve::Migration.open(ctx, dsn) do |m|
  #     m.legacy do |op, shop_id, token, item_id, location_id, quantity, ttl_ms|
  #       # op is :reserve, :claim or :release.  Return to accept; raise
  #       # Libreserve::OutOfStock, NotFound, AlreadyClaimed, Expired or
  #       # AlreadyReleased to refuse; any other exception is a failure.
  #     end
  #     m.reserve_one(shop, token, item_id: 42, location_id: 7, quantity: 1)
  #     m.claim(shop, token)
  #   end
  #
  # The old store is called on the thread of the call (:old, :shadow) and,
  # through ffi, on a Ruby thread of its own for the handle's thread
  # (:primary: keeping the old store current), so it must be thread-safe.
  # It must not call the context.  The checkout's calls take turns with the
  # context's other calls; stage, stat, prometheus and drain may be called
  # from any thread (a monitoring one).  Close the handle before the
  # context: a handle left open keeps its thread and connection.
  class Migration
    include InsideCount

    STAGES = %i[old shadow primary complete].freeze
    # The counters of rsv_migrate_stat, in the library's order, under the
    # library's names (rsv_migrate_class_name: the class labels of
    # prometheus and of rsv-admin); none from a library without the
    # handle (Migration.new says so).
    STATS = if Native::MIGRATE_MISSING
              [].freeze
            else
              (0..).lazy.map { |i| Native.rsv_migrate_class_name(i) }
                   .take_while(&:itself).map(&:to_sym).to_a.freeze
            end
    # What legacy_errors keeps: an old store that keeps failing must not
    # grow the process.
    ERRORS_KEPT = 64
    EDB = -19 # the code of an old store that failed

    # The handles open, each with what its C side calls back: ffi
    # frees a callback's code when its Function is collected, and a
    # handle's thread may call it until the handle is closed, even when
    # its Migration was dropped unclosed.
    LIVE = {}
    LIVE_LOCK = Mutex.new

    # What the handle's calls of the old store reach.  Not the Migration:
    # LIVE holds it, and would keep a dropped Migration alive.
    class Legacy
      attr_accessor :callable, :caller, :said

      def initialize
        @callable = nil
        @caller = nil # the thread of the call in progress, if any
        @said = nil   # [exception or nil]: the old store's answer to it
        @errors = []
        @lock = Mutex.new
      end

      def errors
        @lock.synchronize { @errors.dup }
      end

      # The library's code for what the old store did.
      def call(op, shop_id, token, length, item_id, location_id, quantity, ttl_ms)
        callable = @callable
        return -10 if callable.nil? # removed while its call was on the way

        err = nil
        code = begin
          callable.call(OPS[op], shop_id, token.read_bytes(length), item_id, location_id, quantity, ttl_ms)
          0
        rescue Libreserve::Error => e
          err = e
          e.code
        rescue Exception => e # nothing may cross the C frame
          err = e
          note_failure(e)
          EDB
        end
        @said = [err] if Thread.current.equal?(@caller)
        code
      end

      private

      def note_failure(err)
        @lock.synchronize do
          @errors.shift if @errors.size == ERRORS_KEPT
          @errors << err
        end
      end
    end

    # Migration.open(ctx, shadow_dsn, ...) { |m| ... } closes the handle
    # when the block ends and returns the block's value; without a block
    # it returns the handle.
    def self.open(ctx, shadow_dsn, **kwargs)
      m = new(ctx, shadow_dsn, **kwargs)
      return m unless block_given?

      begin
        yield m
      ensure
        m.close
      end
    end

    # ctx (a Context) answers at :primary and :complete; shadow_dsn is the
    # connection of the handle's own thread (libreserve's side of shadow
    # calls, the stage reads, the counters).  queue_max bounds the work
    # waiting for that thread (0: 4096); refresh_ms how often it reads the
    # stages (default 1000); legacy: the old store, a callable (or give
    # one later with #legacy).
    def initialize(ctx, shadow_dsn, queue_max: 0, refresh_ms: nil, legacy: nil)
      if Native::MIGRATE_MISSING
        raise NotImplementedError, "the loaded libreserve (#{Libreserve.library_path}) predates " \
                                   "the migration handle: #{Native::MIGRATE_MISSING}"
      end
      raise TypeError, "ctx must be a Libreserve::Context, not #{ctx.class}" unless ctx.is_a?(Context)

      Args.string(shadow_dsn, "shadow_dsn")
      Args.integer(queue_max, "queue_max")
      raise InvalidArgument.new(-10, "queue_max must be 0..2**32-1, not #{queue_max}") unless queue_max.between?(0, (2**32) - 1)

      out = FFI::MemoryPointer.new(:pointer)
      rc, msg = ctx.native_call { |c| [Native.rsv_migrate_open(out, c, shadow_dsn, queue_max), Native.rsv_errmsg(c)] }
      raise Libreserve.error_for(rc, msg) unless rc.zero?

      @ctx = ctx # answers inside the calls: must outlive the handle
      @ptr = out.read_pointer
      @pid = Process.pid
      @lock = Mutex.new
      @idle = ConditionVariable.new
      @inside = 0
      @legacy = Legacy.new
      state = @legacy
      @function = FFI::Function.new(:int, %i[pointer uint32 uint64 pointer size_t uint64 uint64 int64 int64]) do |_u, *args|
        state.call(*args)
      end
      LIVE_LOCK.synchronize { LIVE[@ptr.address] = [@legacy, @function] }
      begin
        self.refresh_ms = refresh_ms unless refresh_ms.nil?
        self.legacy = legacy unless legacy.nil?
      rescue StandardError
        close
        raise
      end
    end

    # Registers the old store: a block, or a callable (anything with
    # #call) taking (op, shop_id, token, item_id, location_id, quantity,
    # ttl_ms); op is :reserve (the four last given), :claim or :release
    # (those four 0: the old store finds the checkout by its token).
    def legacy(callable = nil, &block)
      raise ArgumentError, "give the old store as a block or a callable, not both" if callable && block
      raise ArgumentError, "give the old store as a block or a callable (legacy = nil removes it)" unless callable || block

      self.legacy = callable || block
    end

    # Sets the old store (a callable), or removes it with nil: shops at
    # :old and :shadow then raise InvalidArgument.
    def legacy=(callable)
      raise TypeError, "the old store must respond to call, not #{callable.class}" unless callable.nil? || callable.respond_to?(:call)

      inside do |m|
        @legacy.callable = callable
        rc = Native.rsv_migrate_set_legacy(m, callable.nil? ? nil : @function, nil)
        raise Libreserve.error_for(rc) unless rc.zero?
      end
    end

    # How often the handle's thread reads the stages, in milliseconds
    # (50..60000; 1000 by default).
    def refresh_ms=(ms)
      Args.integer(ms, "refresh_ms")
      rc = ms.between?(0, (2**32) - 1) ? inside { |m| Native.rsv_migrate_set_refresh_ms(m, ms) } : -10
      raise Libreserve.error_for(rc, "refresh_ms #{ms} is out of range") unless rc.zero?
    end

    # Holds units for a checkout in the store the shop's stage names;
    # raises what that store answered (OutOfStock ...).
    def reserve_one(shop_id, token, item_id:, location_id:, quantity:, ttl_ms: 0)
      args = Libreserve.reserve_one_args(shop_id, token, item_id, location_id, quantity, ttl_ms)
      checkout { |m| Native.rsv_migrate_reserve_one(m, *args) }
    rescue Libreserve::Error => e
      raise Libreserve.one_line(e)
    end

    # Claims the checkout in the store the shop's stage names.
    def claim(shop_id, token)
      args = Libreserve.checkout_args(shop_id, token)
      checkout { |m| Native.rsv_migrate_claim(m, *args) }
    end

    # Releases the checkout in the store the shop's stage names.
    def release(shop_id, token)
      args = Libreserve.checkout_args(shop_id, token)
      checkout { |m| Native.rsv_migrate_release(m, *args) }
    end

    # The shop's stage as the handle follows it now: :old, :shadow,
    # :primary or :complete.
    def stage(shop_id)
      shop = Args.id(shop_id, "shop_id")
      out = FFI::MemoryPointer.new(:int32)
      inside { |m| Native.rsv_migrate_stage(m, shop, out) }
      STAGES.fetch(out.read_int32)
    end

    # A counter (one of STATS) of one shop, or of every shop (shop_id nil).
    def stat(kind, shop_id = nil)
      i = STATS.index(kind) or raise ArgumentError, "stat must be one of #{STATS.join(', ')}, not #{kind.inspect}"
      shop = shop_id.nil? ? 0 : Args.id(shop_id, "shop_id")
      out = FFI::MemoryPointer.new(:uint64)
      rc = inside { |m| Native.rsv_migrate_stat(m, shop, shop_id.nil? ? 1 : 0, i, out) }
      raise Libreserve.error_for(rc) unless rc.zero?

      out.read_uint64
    end

    # Waits until the queue for the handle's thread is empty: true, or
    # false after timeout_ms.
    def drain(timeout_ms = 10_000)
      Args.integer(timeout_ms, "timeout_ms")
      ms = timeout_ms.clamp(0, (2**32) - 1)
      inside { |m| Native.rsv_migrate_drain(m, ms) }.zero?
    end

    # The counters and each shop's stage in the Prometheus text format.
    def prometheus
      inside do |m|
        need = FFI::MemoryPointer.new(:size_t)
        Native.rsv_migrate_prometheus(m, nil, 0, need)
        loop do
          buf = FFI::MemoryPointer.new(:char, need.read(:size_t) + 1)
          rc = Native.rsv_migrate_prometheus(m, buf, buf.size, need)
          break buf.read_string if rc.zero?
          raise Libreserve.error_for(rc) unless rc == -23 # grown since: ask again with the new size
        end
      end
    end

    # What the old store failed with (exceptions that are no
    # Libreserve::Error), the latest 64, oldest first: those raised on the
    # handle's thread reach no caller.
    def legacy_errors
      @legacy.errors
    end

    # Does the work still queued, stops the handle's thread and frees the
    # handle, once the calls in progress have returned.  Closing twice is
    # harmless; calls made afterwards raise IOError.
    def close
      ptr = @lock.synchronize do
        return if @ptr.nil?

        p = @ptr
        @ptr = nil
        # (a forked child has none of the thread close would wait for)
        return if Process.pid != @pid

        @idle.wait(@lock) while @inside.positive?
        p
      end
      Native.rsv_migrate_close(ptr)
      LIVE_LOCK.synchronize { LIVE.delete(ptr.address) }
      nil
    end

    def closed?
      @ptr.nil?
    end

    private

    def inside_what
      "migration handle"
    end

    # One of the checkout's calls, on the context (the handle uses it
    # inside the call); raises what the deciding store answered: the old
    # store's exception as the cause, or libreserve's message.
    def checkout
      rc, said, msg = inside do |m|
        @ctx.native_call do |c|
          @legacy.said = nil
          @legacy.caller = Thread.current
          begin
            rc = yield m
          ensure
            @legacy.caller = nil
          end
          [rc, @legacy.said, rc.negative? ? Native.rsv_errmsg(c) : nil]
        end
      end
      return true if rc.zero?

      if said
        old = said.first
        raise Libreserve.error_for(rc, old && "the old store: #{old.message}"), cause: old
      end
      # refused before any store was asked: the context's message is an
      # earlier call's
      msg = "no old store registered (Migration#legacy) for a shop at stage old or shadow" if rc == -10
      raise Libreserve.error_for(rc, msg), cause: nil
    end
  end
end
