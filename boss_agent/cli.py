"""placeholder"""
def main(): pass
