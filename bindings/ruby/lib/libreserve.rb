# frozen_string_literal: true

# libreserve keeps a shop from selling the same unit twice: units are held
# while a buyer pays (reserve), taken off the stock when payment succeeds
# (claim), given back when it fails (release), and expire when nothing
# happens.  This gem is its Ruby binding, over the C library with ffi:
#
#   Libreserve.open("mariadb://app:secret@db/shop") do |ctx|
#     ctx.reserve_one(1, "checkout-9001", item_id: 42, location_id: 7, quantity: 2)
#     ctx.claim(1, "checkout-9001")
#   end
#
# Every call that fails raises an exception that includes Libreserve::Error
# (code, code_name, detail); see errors.rb.
module Libreserve
  TOKEN_MAX = 128
  QUANTITY_MAX = 1_000_000_000
  BATCH_MAX = 256
end

require_relative "libreserve/version"
require_relative "libreserve/native"
require_relative "libreserve/errors"
require_relative "libreserve/args"
require_relative "libreserve/inside"
require_relative "libreserve/context"
require_relative "libreserve/batcher"
require_relative "libreserve/migration"

module Libreserve
  OPTION_INT64 = %i[pool_cap refill_low_water hold_ttl_ms settled_retention_s pool_idle_s call_timeout_ms].freeze
  OPTION_INT32 = %i[max_retries retry_base_us lock_wait_timeout_s stmt_cache_max].freeze
  INT32 = (-(2**31)..(2**31) - 1).freeze

  class << self
    # Context.open: a context on a connection of its own.
    def open(dsn, **options, &block)
      Context.open(dsn, **options, &block)
    end

    # A connection string with every part %XX-escaped, e.g.
    #   Libreserve.dsn(database: "shop", user: "app", password: "p@ss",
    #                  socket: "/run/mysqld/mysqld.sock", connect_timeout: 5)
    # params are the other keys the library knows (connect_timeout,
    # read_timeout, write_timeout, ssl, ssl_ca, ssl_capath, ssl_cert,
    # ssl_key, ssl_verify); nil values are left out.
    def dsn(database:, user: nil, password: nil, host: nil, port: nil, socket: nil, **params)
      auth = user.nil? ? "" : "#{escape(user)}#{password.nil? ? '' : ":#{escape(password)}"}@"
      where = host.nil? ? "" : escape(host)
      where += ":#{Args.integer(port, 'port')}" unless port.nil?
      query = [[:socket, socket], *params.sort_by { |k, _| k.to_s }].reject { |_, v| v.nil? }
      query = query.map { |k, v| "#{escape(k)}=#{escape(v == true ? 1 : v == false ? 0 : v)}" }.join("&")
      "mariadb://#{auth}#{where}/#{escape(database)}#{query.empty? ? '' : "?#{query}"}"
    end

    # The loaded library's version.
    def library_version
      Native.rsv_version
    end

    # The library file that was loaded (as it was named).
    def library_path
      Native::LIBRARY
    end

    # --- shared by Context and Batcher; not part of the API ---

    # A releaser that closes only in the process that opened: a forked
    # child closing the inherited connection would end the parent's
    # session (the server sees one socket, one session).
    def closer(pid)
      proc { |ptr| yield ptr if Process.pid == pid }
    end

    def check_pid(pid, what)
      return if Process.pid == pid

      raise IOError, "this libreserve #{what} was opened by process #{pid}, before a fork: " \
                     "open a new one in this process (#{Process.pid})"
    end

    # struct rsv_options with the library's defaults, then the given
    # fields.  Returns it and what it points to (keep both alive).
    def native_options(options)
      o = Native::Options.new
      rc = Native.rsv_options_init(o, 1)
      raise error_for(rc, "the loaded libreserve does not know these options") unless rc.zero?

      keep = nil
      options.each do |key, value|
        if OPTION_INT64.include?(key)
          o[key] = Args.int64(value, key.to_s)
        elsif OPTION_INT32.include?(key)
          Args.integer(value, key.to_s)
          raise InvalidArgument.new(-10, "#{key} must fit in 32 bits, not #{value}") unless INT32.cover?(value)

          o[key] = value
        elsif key == :no_proactive_refill
          o[:flags] |= 0x2 if Args.bool(value, key.to_s)
        elsif key == :conn_tag_prefix
          keep = FFI::MemoryPointer.from_string(Args.string(value, key.to_s))
          o[:conn_tag_prefix] = keep
        else
          raise ArgumentError, "unknown keyword: #{key.inspect}"
        end
      end
      [o, keep]
    end

    # A token as the library takes it: a pointer to its bytes and their
    # count, in memory of its own (the GVL is released during the call).
    def token_arg(token)
      bytes = Args.token(token)
      [FFI::MemoryPointer.new(:char, bytes.bytesize).put_bytes(0, bytes), bytes.bytesize]
    end

    # The arguments that name a checkout: shop id, token, token length.
    def checkout_args(shop_id, token)
      [Args.id(shop_id, "shop_id"), *token_arg(token)]
    end

    def reserve_one_args(shop_id, token, item_id, location_id, quantity, ttl_ms)
      checkout_args(shop_id, token) +
        [Args.id(item_id, "item_id"), Args.id(location_id, "location_id"), Args.quantity(quantity), Args.ttl(ttl_ms)]
    end

    # A reserve of lines (Hashes, as Context#reserve takes them): checks
    # the arguments, yields the shop id, token, native cart and ttl for the
    # call that sends it, and returns where each line is held; OutOfStock
    # and NoItem get the line that could not be served.
    def reserve_lines(shop_id, token, lines, ttl_ms)
      shop = Args.id(shop_id, "shop_id")
      tok = token_arg(token)
      ttl = Args.ttl(ttl_ms)
      raise TypeError, "lines must be an Array of Hashes, not #{lines.class}" unless lines.is_a?(Array)

      with_cart(lines) do |cart|
        begin
          yield shop, tok, cart, ttl
        rescue OutOfStock, NoItem => e
          raise note_failed_line(e, cart, lines.size)
        end
        allocations(cart, lines.size)
      end
    end

    # e with the cart's failed line, if it names one of its n lines.
    def note_failed_line(e, cart, n)
      line = Native.rsv_cart_failed_line(cart)
      e.failed_line = line if e.respond_to?(:failed_line=) && line < n
      e
    end

    def with_cart(lines)
      cart = new_cart(lines)
      begin
        yield cart
      ensure
        Native.rsv_cart_free(cart)
      end
    end

    # A native cart of lines (Hashes, as Context#reserve takes them); the
    # caller frees it with Native.rsv_cart_free.
    def new_cart(lines)
      out = FFI::MemoryPointer.new(:pointer)
      rc = Native.rsv_cart_new(out)
      raise error_for(rc) unless rc.zero?

      cart = out.read_pointer
      begin
        lines.each_with_index { |line, i| add_line(cart, line, i) }
      rescue StandardError
        Native.rsv_cart_free(cart)
        raise
      end
      cart
    end

    def allocations(cart, n)
      count = FFI::MemoryPointer.new(:size_t)
      loc = FFI::MemoryPointer.new(:uint64)
      qty = FFI::MemoryPointer.new(:int64)
      Array.new(n) do |line|
        Native.rsv_cart_allocation_count(cart, line, count)
        Array.new(count.read(:size_t)) do |i|
          Native.rsv_cart_allocation(cart, line, i, loc, qty)
          Allocation.new(location_id: loc.read_uint64, quantity: qty.read_int64)
        end
      end
    end

    # The rows of a batch: each entry a Hash with exactly the keys given,
    # checked like the single call's arguments.
    def batch_rows(entries, keys)
      raise TypeError, "a batch must be an Array of Hashes, not #{entries.class}" unless entries.is_a?(Array)
      unless entries.size.between?(1, BATCH_MAX)
        raise InvalidArgument.new(-10, "a batch takes 1..#{BATCH_MAX} entries, not #{entries.size}")
      end

      entries.each_with_index.map do |e, i|
        raise TypeError, "batch entry #{i} must be a Hash, not #{e.class}" unless e.is_a?(Hash)

        extra = e.keys - keys
        raise ArgumentError, "batch entry #{i}: unknown key #{extra.first.inspect}" unless extra.empty?

        keys.map do |k|
          raise ArgumentError, "batch entry #{i}: missing #{k}:" unless e.key?(k)

          v = e[k]
          case k
          when :token then Args.token(v)
          when :quantity then Args.quantity(v)
          else Args.id(v, k.to_s)
          end
        end
      end
    end

    private

    def escape(value)
      value.to_s.b.gsub(/[^A-Za-z0-9\-._~]/n) { |c| format("%%%02X", c.ord) }
    end

    def add_line(cart, line, index)
      raise TypeError, "cart line #{index} must be a Hash, not #{line.class}" unless line.is_a?(Hash)

      extra = line.keys - %i[item_id locations quantity split]
      raise ArgumentError, "cart line #{index}: unknown key #{extra.first.inspect}" unless extra.empty?

      item = Args.id(line.fetch(:item_id) { raise ArgumentError, "cart line #{index}: missing item_id:" }, "item_id")
      locs = line.fetch(:locations) { raise ArgumentError, "cart line #{index}: missing locations:" }
      raise TypeError, "cart line #{index}: locations must be an Array, not #{locs.class}" unless locs.is_a?(Array)
      raise InvalidArgument.new(-10, "cart line #{index} has no location") if locs.empty?

      locs = locs.map { |l| Args.id(l, "location_id") }
      if (dup = locs.find { |l| locs.count(l) > 1 })
        raise InvalidArgument.new(-10, "cart line #{index} lists location #{dup} twice")
      end

      qty = Args.quantity(line.fetch(:quantity) { raise ArgumentError, "cart line #{index}: missing quantity:" })
      split = Args.bool(line.fetch(:split, false), "split") ? 1 : 0
      ptr = FFI::MemoryPointer.new(:uint64, locs.size).write_array_of_uint64(locs)
      rc = Native.rsv_cart_add(cart, item, ptr, locs.size, qty, split)
      raise error_for(rc, "cart line #{index}: #{Native.rsv_strerror(rc)}") unless rc.zero?
    end
  end
end
