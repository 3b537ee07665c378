# frozen_string_literal: true

module Libreserve
  # Args owns the checks every argument passes before it reaches the C
  # library: wrong types raise TypeError, values out of range the
  # library's own ArgumentError subclasses, so nothing is sent.  Without
  # them FFI would turn -1 into 2**64-1 for an unsigned id, and 2.5 into 2.
  module Args
    U64 = (0..(2**64) - 1).freeze
    I64 = (-(2**63)..(2**63) - 1).freeze
    TTL_MAX_MS = 30 * 24 * 3600 * 1000

    module_function

    def integer(value, name)
      return value if value.is_a?(Integer)

      raise TypeError, "#{name} must be an Integer, not #{value.class}"
    end

    def id(value, name)
      integer(value, name)
      return value if U64.cover?(value)

      raise InvalidArgument.new(-10, "#{name} must be 0..2**64-1, not #{value}")
    end

    def int64(value, name)
      integer(value, name)
      return value if I64.cover?(value)

      raise InvalidArgument.new(-10, "#{name} must fit in 64 bits, not #{value}")
    end

    def quantity(value, name = "quantity")
      integer(value, name)
      return value if value.between?(1, QUANTITY_MAX)

      raise InvalidQuantity.new(-11, "#{name} must be 1..#{QUANTITY_MAX}, not #{value}")
    end

    def ttl(value)
      integer(value, "ttl_ms")
      return value if value.between?(0, TTL_MAX_MS)

      raise InvalidQuantity.new(-11, "ttl_ms must be 1..#{TTL_MAX_MS} (30 days) or 0 for the default, not #{value}")
    end

    # The token's bytes, exactly: a token is compared byte for byte.
    def token(value)
      raise TypeError, "token must be a String, not #{value.class}" unless value.is_a?(String)

      bytes = value.b
      return bytes if bytes.bytesize.between?(1, TOKEN_MAX)

      raise InvalidToken.new(-13, "checkout token must be 1..#{TOKEN_MAX} bytes, not #{bytes.bytesize}")
    end

    def bool(value, name)
      return value if [true, false].include?(value)

      raise TypeError, "#{name} must be true or false, not #{value.class}"
    end

    def string(value, name)
      raise TypeError, "#{name} must be a String, not #{value.class}" unless value.is_a?(String)
      raise InvalidArgument.new(-10, "#{name} contains a NUL byte") if value.include?("\0")

      value
    end
  end
end
